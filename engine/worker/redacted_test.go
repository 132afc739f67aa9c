package worker_test

import (
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/redact"
)

// Redacted replaces a declared value in log lines and live output, and a
// line the replacement lengthens past its wire bound becomes the bound's
// marker; nil secrets leave the sinks as they are.
func TestSinksRedacted(t *testing.T) {
	var logs, outs []string
	s := worker.Sinks{
		Log:    func(_, msg string) { logs = append(logs, msg) },
		Output: func(text string) { outs = append(outs, text) },
	}
	r := s.Redacted(redact.New([]string{"s3cr3t"}))
	r.Log("info", "key s3cr3t here")
	r.Output("s3cr3t")
	long := strings.Repeat("s3cr3t", protocol.MaxAttachOutputBytes/6) // within the bound until redacted
	r.Output(long)
	if len(logs) != 1 || logs[0] != "key "+redact.Marker+" here" {
		t.Errorf("log lines %q", logs)
	}
	if len(outs) != 2 || outs[0] != redact.Marker || outs[1] != protocol.RedactedAttachOutput {
		t.Errorf("output lines %q", outs)
	}
	if s.Redacted(nil).Log == nil || (worker.Sinks{}).Redacted(redact.New([]string{"s3cr3t"})).Log != nil {
		t.Error("Redacted invents or drops a sink")
	}
}
