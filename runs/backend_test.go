package runs_test

import (
	"encoding/json"
	"testing"
)

func TestOneStepRunFinishes(t *testing.T) {
	r := newRig(t, nil, 0)
	ctx := as("alice")
	res, err := r.b.Submit(ctx, "r1", oneStep("k1", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != "r1" {
		t.Fatalf("runId %q", res.RunID)
	}
	st := waitFinished(t, r.b, ctx, "r1")
	got, _ := json.Marshal(st)
	if string(got) != `{"phase":"finished","terminalResult":{"status":"succeeded","output":null}}` {
		t.Fatalf("final status %s", got)
	}
}
