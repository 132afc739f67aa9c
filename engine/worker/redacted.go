package worker

import (
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/redact"
)

// Redacted returns s with every line passed through secrets first: a log
// line or a line of live output has each spelling of a declared value
// replaced, and a line the replacement made longer than its wire bound
// becomes the bound's marker. A nil secrets returns s unchanged.
func (s Sinks) Redacted(secrets *redact.Secrets) Sinks {
	if secrets == nil {
		return s
	}
	out := Sinks{}
	if s.Log != nil {
		out.Log = func(level, msg string) {
			s.Log(level, within(secrets.Replace(msg), protocol.MaxLogMessageBytes, protocol.RedactedLogMessage))
		}
	}
	if s.Output != nil {
		out.Output = func(text string) {
			s.Output(within(secrets.Replace(text), protocol.MaxAttachOutputBytes, protocol.RedactedAttachOutput))
		}
	}
	return out
}

// within is line, or marker when line is longer than limit bytes.
func within(line string, limit int, marker string) string {
	if len(line) > limit {
		return marker
	}
	return line
}
