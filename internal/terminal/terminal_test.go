package terminal_test

import (
	"encoding/json"
	"testing"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/internal/terminal"
	"github.com/oecp/oecp/protocol"
)

func TestResult(t *testing.T) {
	for _, tc := range []struct {
		in   reduce.Terminal
		want string
	}{
		{reduce.Terminal{Status: reduce.TerminalSucceeded, Output: json.RawMessage(`{"a":[1,"x"]}`)}, `{"status":"succeeded","output":{"a":[1,"x"]}}`},
		{reduce.Terminal{Status: reduce.TerminalSucceeded}, `{"status":"succeeded","output":null}`},
		{reduce.Terminal{Status: reduce.TerminalSucceeded, Output: json.RawMessage(`2`), Reason: "ignored"}, `{"status":"succeeded","output":2}`},
		{reduce.Terminal{Status: reduce.TerminalFailed, Reason: "force_stopped", Output: json.RawMessage(`3`)}, `{"status":"failed","reason":"force_stopped"}`},
	} {
		tr, err := terminal.Result(tc.in)
		if err != nil {
			t.Fatalf("%+v: %v", tc.in, err)
		}
		got, err := protocol.Marshal(tr)
		if err != nil || string(got) != tc.want {
			t.Fatalf("%+v: %s %v, want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := terminal.Result(reduce.Terminal{Status: reduce.TerminalSucceeded, Output: json.RawMessage(`{"a":`)}); err == nil {
		t.Fatal("an output that is not JSON is normalised")
	}
}
