package main

import (
	"strings"
	"testing"
)

// TestCLIRunNodeNames: wherever a run command asks for an execution, a
// node name stands for the node's latest execution, ended ones included;
// a name that matches nothing is an error, not an empty answer.
func TestCLIRunNodeNames(t *testing.T) {
	srv := exampleServer(t)
	submit := []string{"run", "submit", "-f", exampleGraph, "--runtime", exampleRuntime, "--input", exampleInput, "--source", testSource, "--id", "nodes-1"}
	expect(t, oecp(t, srv, append(submit, "--watch")...), 0, nil, nil)
	r := oecp(t, srv, "run", "logs", "nodes-1", "--execution", "review")
	expect(t, r, 0, []string{"review/1: echo-agent: verifier node review"}, nil)
	if strings.Contains(r.stdout, "draft/1:") {
		t.Errorf("logs --execution review printed draft's records:\n%s", r.stdout)
	}
	expect(t, oecp(t, srv, "run", "logs", "nodes-1", "--execution", "deliver"), 1, nil, []string{`run nodes-1 has no execution "deliver"`})
	// An ended node's execution is found, and is no longer attachable.
	expect(t, oecp(t, srv, "run", "attach", "nodes-1", "draft"), 1, nil, []string{"GONE", "no longer active", "oecp run logs ID --execution"})
	expect(t, oecp(t, srv, "run", "attach", "nodes-1", "nope"), 1, nil, []string{`run nodes-1 has no execution "nope"`})
}
