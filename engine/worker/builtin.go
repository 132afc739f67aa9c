package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oecp/oecp/verifier"
)

// Built-in worker references: those the verifier's BuiltinRegistry
// describes, implemented here.
const (
	BuiltinEcho    = verifier.BuiltinEcho
	BuiltinFail    = verifier.BuiltinFail
	BuiltinSleep   = verifier.BuiltinSleep
	BuiltinApprove = verifier.BuiltinApprove
	BuiltinReject  = verifier.BuiltinReject
)

// Builtins returns the built-in workers by reference.
func Builtins() map[string]Worker {
	return map[string]Worker{
		BuiltinEcho:    WorkerFunc(echo),
		BuiltinFail:    WorkerFunc(fail),
		BuiltinSleep:   WorkerFunc(sleep),
		BuiltinApprove: verdict("approved"),
		BuiltinReject:  verdict("rejected"),
	}
}

// WorkerFunc adapts a function to Worker.
type WorkerFunc func(ctx context.Context, ex Execution) Outcome

// Run calls f.
func (f WorkerFunc) Run(ctx context.Context, ex Execution) Outcome { return f(ctx, ex) }

func say(ex Execution, msg string) {
	if ex.Sinks.Log != nil {
		ex.Sinks.Log("info", msg)
	}
	if ex.Sinks.Output != nil {
		ex.Sinks.Output(msg)
	}
}

// echo returns its input as its output.
func echo(ctx context.Context, ex Execution) Outcome {
	say(ex, fmt.Sprintf("echo: %d bytes", len(ex.Input)))
	if ctx.Err() != nil {
		return Failed(CodeTimeout, ReasonDeclaredFailure)
	}
	return Outcome{Status: "verified", Output: ex.Input}
}

// fail always fails with a declared crash.
func fail(_ context.Context, ex Execution) Outcome {
	say(ex, "fail: declared failure")
	return Failed(CodeCrash, ReasonDeclaredFailure)
}

// sleep waits input.ms milliseconds, honouring cancellation and timeout.
func sleep(ctx context.Context, ex Execution) Outcome {
	var in struct {
		MS json.Number `json:"ms"`
	}
	if err := json.Unmarshal(ex.Input, &in); err != nil {
		return Failed(CodeMalformed, ReasonMalformedResult)
	}
	ms, err := in.MS.Int64()
	if err != nil || ms < 0 {
		return Failed(CodeMalformed, ReasonMalformedResult)
	}
	say(ex, fmt.Sprintf("sleep: %dms", ms))
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		say(ex, "sleep: done")
		return Outcome{Status: "verified", Output: json.RawMessage("null")}
	case <-ctx.Done():
		return Failed(CodeTimeout, ReasonDeclaredFailure)
	}
}

// verdict is a verifier that always returns the same verdict label.
func verdict(label string) Worker {
	return WorkerFunc(func(_ context.Context, ex Execution) Outcome {
		say(ex, "verdict: "+label)
		return Outcome{Status: "verifier", Output: json.RawMessage("null"), Signals: map[string]string{"verdict": label}, Diagnostic: json.RawMessage("null")}
	})
}
