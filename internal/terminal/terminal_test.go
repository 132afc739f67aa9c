package terminal_test

import (
	"encoding/json"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/internal/terminal"
	"github.com/oecp/oecp/protocol"
)

// resultIs fails t unless the result of in encodes as want.
func resultIs(t *testing.T, in reduce.Terminal, want string) {
	t.Helper()
	tr, err := terminal.Result(in)
	if err != nil {
		t.Fatalf("%+v: %v", in, err)
	}
	if got, err := protocol.Marshal(tr); err != nil || string(got) != want {
		t.Fatalf("%+v: %s %v, want %s", in, got, err, want)
	}
}

// A succeeded run's result is its normalised output (null without one)
// and no reason; any other run's is its reason and no output.
func TestResult(t *testing.T) {
	ok, failed := reduce.TerminalSucceeded, reduce.TerminalFailed
	resultIs(t, reduce.Terminal{Status: ok, Output: json.RawMessage(`{"a":[1,"x"]}`)}, `{"status":"succeeded","output":{"a":[1,"x"]}}`)
	resultIs(t, reduce.Terminal{Status: ok}, `{"status":"succeeded","output":null}`)
	resultIs(t, reduce.Terminal{Status: ok, Output: json.RawMessage(`2`), Reason: "ignored"}, `{"status":"succeeded","output":2}`)
	resultIs(t, reduce.Terminal{Status: failed, Reason: "force_stopped", Output: json.RawMessage(`3`)}, `{"status":"failed","reason":"force_stopped"}`)
	if _, err := terminal.Result(reduce.Terminal{Status: ok, Output: json.RawMessage(`{"a":`)}); err == nil {
		t.Fatal("an output that is not JSON is normalised")
	}
}
