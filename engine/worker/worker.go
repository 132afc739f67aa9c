// Package worker runs one execution of a graph executable: the built-in
// deterministic workers (builtin.echo@1, builtin.fail@1, builtin.sleep@1,
// builtin.approve@1, builtin.reject@1) and host-configured command workers
// (--workers FILE). A worker turns an input value into a WorkerOutcome; it
// reports live output through the execution's sinks and honours ctx
// (cancellation and the node's timeout). Graphs never carry commands: only
// the host's workers file does.
//
// The process runner here (Process: one program in its own process group,
// with bounded output, a hook that confines it and a Tap that receives its
// raw evidence) also runs the agent CLIs of engine/harness and the forge
// CLI of delivery, and Group finds and kills what a worker of a lost server
// left behind.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/oecp/oecp/protocol"
)

// Error codes and reasons of WorkerOutcome (spec/01 §7).
const (
	CodeTimeout   = "timeout"
	CodeCrash     = "crash"
	CodeMalformed = "malformed"
	CodeRefusal   = "refusal"

	ReasonDeclaredFailure = "declared_failure"
	ReasonMalformedResult = "malformed_result"
)

// Outcome is a WorkerOutcome.
type Outcome struct {
	// Status is "verified" (a step), "verifier" (a verifier) or "error".
	Status     string
	Output     json.RawMessage
	Signals    map[string]string
	Diagnostic json.RawMessage
	Code       string
	Reason     string
	// HostFault, when set, says why the host could not start the
	// execution (a full disk, a sandbox it could not set up): the
	// execution neither ran nor failed, and a supervisor that can record
	// it so runs the same attempt again. It is never on the wire; a
	// consumer that ignores it sees Code and Reason (crash).
	HostFault string
}

// HostFailed is the outcome of an execution its host could not start,
// for the reason why.
func HostFailed(why string) Outcome {
	o := Failed(CodeCrash, ReasonDeclaredFailure)
	o.HostFault = why
	return o
}

// Failed builds an error outcome.
func Failed(code, reason string) Outcome { return Outcome{Status: "error", Code: code, Reason: reason} }

// IsError reports whether the outcome is an error.
func (o Outcome) IsError() bool { return o.Status == "error" }

// MarshalJSON writes the reference's WorkerOutcome shape with normalised
// free-form values.
func (o Outcome) MarshalJSON() ([]byte, error) {
	b := []byte(`{"status":`)
	b = protocol.AppendString(b, o.Status)
	switch o.Status {
	case "error":
		b = append(b, `,"code":`...)
		b = protocol.AppendString(b, o.Code)
		b = append(b, `,"reason":`...)
		b = protocol.AppendString(b, o.Reason)
	case "verifier":
		var err error
		if b, err = appendValue(b, ",\"output\":", o.Output); err != nil {
			return nil, err
		}
		b = append(b, `,"signals":{`...)
		keys := make([]string, 0, len(o.Signals))
		for k := range o.Signals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = protocol.AppendString(b, k)
			b = append(b, ':')
			b = protocol.AppendString(b, o.Signals[k])
		}
		b = append(b, '}')
		if b, err = appendValue(b, ",\"diagnostic\":", o.Diagnostic); err != nil {
			return nil, err
		}
		b = append(b, `,"artifacts":[]`...)
	default:
		var err error
		if b, err = appendValue(b, ",\"output\":", o.Output); err != nil {
			return nil, err
		}
		b = append(b, `,"artifacts":[]`...)
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, key string, v json.RawMessage) ([]byte, error) {
	b = append(b, key...)
	if len(v) == 0 {
		return append(b, "null"...), nil
	}
	n, err := protocol.NormalizeValue(v)
	if err != nil {
		return nil, err
	}
	return append(b, n...), nil
}

// UnmarshalJSON reads a WorkerOutcome back (from the ledger).
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var raw struct {
		Status     string            `json:"status"`
		Output     json.RawMessage   `json:"output"`
		Signals    map[string]string `json:"signals"`
		Diagnostic json.RawMessage   `json:"diagnostic"`
		Code       string            `json:"code"`
		Reason     string            `json:"reason"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*o = Outcome{Status: raw.Status, Output: raw.Output, Signals: raw.Signals, Diagnostic: raw.Diagnostic, Code: raw.Code, Reason: raw.Reason}
	return nil
}

// Sinks receive an execution's live output. Either may be nil.
type Sinks struct {
	// Log records one log line (level, message) of the execution.
	Log func(level, message string)
	// Output publishes one line of live output (agent/attach).
	Output func(text string)
}

// Execution is one dispatch handed to a worker.
type Execution struct {
	// Ref is the ExecutionRef clients use with agent/attach and that log
	// records carry as their target.
	Ref     string
	Node    string
	Attempt int64
	Input   json.RawMessage
	Sinks   Sinks
	// Started, when set, is called with the process group id of each
	// external program the worker starts for the execution, once it runs.
	Started func(pgid int)
	// Tap, when set, receives the raw evidence of each external program
	// the worker starts for the execution.
	Tap Tap
}

// Worker runs executions. Run must return when ctx is done; the caller
// decides whether that was a timeout (context.DeadlineExceeded) or a
// cancellation (the outcome is then discarded).
type Worker interface {
	Run(ctx context.Context, ex Execution) Outcome
}

// Registry maps worker references to workers.
type Registry struct {
	workers map[string]Worker
}

// NewRegistry returns a registry holding the built-in workers.
func NewRegistry() *Registry {
	r := &Registry{workers: map[string]Worker{}}
	for ref, w := range Builtins() {
		r.workers[ref] = w
	}
	return r
}

// ErrDuplicateWorker is returned when a worker reference is registered twice.
var ErrDuplicateWorker = errors.New("worker reference already registered")

// Add registers a worker under ref.
func (r *Registry) Add(ref string, w Worker) error {
	if _, ok := r.workers[ref]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicateWorker, ref)
	}
	r.workers[ref] = w
	return nil
}

// Lookup returns the worker for ref.
func (r *Registry) Lookup(ref string) (Worker, bool) {
	w, ok := r.workers[ref]
	return w, ok
}

// Refs lists registered references, sorted.
func (r *Registry) Refs() []string {
	out := make([]string, 0, len(r.workers))
	for k := range r.workers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SanitizeLine makes one line of worker output safe for a log message or
// attach text: control characters are escaped (\n, \t, \u00XX) and a line
// over the byte bound is replaced by the redaction marker.
func SanitizeLine(s string, bound int, marker string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case protocol.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > bound {
		return marker
	}
	return out
}
