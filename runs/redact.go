package runs

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/redact"
)

// recordRedactor replaces, in everything an execution of a run records (its
// output, diagnostic, log lines and live output), the value of every
// environment variable the run's plan declares for any node, in each of its
// redact.Spellings (the value, its hex and base64): an agent may echo a key
// it was given into its answer, or into a file a delivery then reports on,
// and may encode it on the way. A nil recordRedactor changes nothing.
type recordRedactor struct {
	secrets *redact.Secrets
}

// newRecordRedactor reads the declared variables' values from the server's
// environment; nil when none is set.
func newRecordRedactor(sub *Submission) *recordRedactor {
	var values []string
	for _, b := range sub.Runtime.Nodes {
		for _, name := range b.Env {
			if v, ok := os.LookupEnv(name); ok && v != "" {
				values = append(values, v)
			}
		}
	}
	secrets := redact.New(values)
	if secrets == nil {
		return nil
	}
	return &recordRedactor{secrets: secrets}
}

// byteValues are the spellings the redactor replaces, longest first (none
// for nil), for the evidence, which redacts a stream of bytes itself.
func (r *recordRedactor) byteValues() [][]byte {
	if r == nil {
		return nil
	}
	sp := r.secrets.Spellings()
	out := make([][]byte, len(sp))
	for i, v := range sp {
		out[i] = []byte(v)
	}
	return out
}

// sinks wraps s so every line is redacted, within the line bounds.
func (r *recordRedactor) sinks(s worker.Sinks) worker.Sinks {
	if r == nil {
		return s
	}
	out := worker.Sinks{}
	if s.Log != nil {
		out.Log = func(level, msg string) {
			s.Log(level, bound(r.secrets.Replace(msg), protocol.MaxLogMessageBytes, protocol.RedactedLogMessage))
		}
	}
	if s.Output != nil {
		out.Output = func(text string) {
			s.Output(bound(r.secrets.Replace(text), protocol.MaxAttachOutputBytes, protocol.RedactedAttachOutput))
		}
	}
	return out
}

func bound(s string, limit int, marker string) string {
	if len(s) > limit {
		return marker
	}
	return s
}

// outcome redacts the outcome's output and diagnostic.
func (r *recordRedactor) outcome(o worker.Outcome) worker.Outcome {
	if r == nil {
		return o
	}
	o.Output = r.json(o.Output)
	o.Diagnostic = r.json(o.Diagnostic)
	return o
}

// json redacts every string (keys included) of a JSON value that holds a
// spelling, in any of its JSON spellings; other values are returned as
// they are.
func (r *recordRedactor) json(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !r.mentioned(raw) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(r.secrets.Replace(string(raw)))
	}
	out, err := json.Marshal(r.walk(v))
	if err != nil {
		return raw
	}
	return out
}

// mentioned reports whether raw may hold a spelling: as it is, escaped as
// json.Marshal escapes it, or behind an escape json.Marshal does not write
// (any \u, or \/ where a spelling has a '/', as base64 may).
func (r *recordRedactor) mentioned(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	slash := bytes.Contains(raw, []byte(`\/`))
	for _, v := range r.secrets.Spellings() {
		esc, _ := json.Marshal(v)
		if bytes.Contains(raw, []byte(v)) || bytes.Contains(raw, esc[1:len(esc)-1]) || slash && strings.Contains(v, "/") {
			return true
		}
	}
	return false
}

func (r *recordRedactor) walk(v any) any {
	switch t := v.(type) {
	case string:
		return r.secrets.Replace(t)
	case []any:
		for i := range t {
			t[i] = r.walk(t[i])
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[r.secrets.Replace(k)] = r.walk(e)
		}
		return out
	}
	return v
}
