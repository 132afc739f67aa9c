package runs

import (
	"os"

	"github.com/oecp/oecp/engine/worker"
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
	return s.Redacted(r.secrets)
}

// outcome redacts the outcome's output and diagnostic (redact's
// Secrets.JSON).
func (r *recordRedactor) outcome(o worker.Outcome) worker.Outcome {
	if r == nil {
		return o
	}
	o.Output = r.secrets.JSON(o.Output)
	o.Diagnostic = r.secrets.JSON(o.Diagnostic)
	return o
}
