package harness_test

import (
	"context"
	"testing"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
)

// gateDriver answers every turn with session "s-1" and a valid answer once
// release delivers; entered receives each turn's requested session.
type gateDriver struct {
	entered chan string
	release chan struct{}
}

func (d *gateDriver) Turn(ctx context.Context, t harness.Turn, _ worker.Sinks) (harness.Reply, error) {
	d.entered <- t.Session
	select {
	case <-d.release:
		return harness.Reply{Session: "s-1", Text: `{"text":"better"}`}, nil
	case <-ctx.Done():
		return harness.Reply{}, ctx.Err()
	}
}

// Two executions of one node instance never overlap: the second starts its
// turn only after the first released the session, and resumes it.
func TestNodeInstanceTurnsSerialized(t *testing.T) {
	d := &gateDriver{entered: make(chan string), release: make(chan struct{})}
	r := harness.NewRunner(d, 0)
	job := harness.Job{Key: "run-1", Instance: "ni-1", Node: textStep(t), Binding: harness.Binding{Model: "m", SessionScope: harness.ScopeNodeInstance}, Dir: t.TempDir()}
	results := make(chan string, 2)
	start := func() { results <- outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})) }
	go start()
	if s := testkit.Recv(t, d.entered); s != "" {
		t.Fatalf("first execution resumed %q", s)
	}
	go start()
	d.release <- struct{}{}
	if s := testkit.Recv(t, results); s != wantVerified {
		t.Fatalf("first: %s", s)
	}
	if s := testkit.Recv(t, d.entered); s != "s-1" {
		t.Fatalf("second execution got session %q", s)
	}
	d.release <- struct{}{}
	if s := testkit.Recv(t, results); s != wantVerified {
		t.Fatalf("second: %s", s)
	}
}

// A run's sessions are dropped by CloseRun; an execution waiting for a
// session gives up when its ctx ends.
func TestCloseRunAndCancelledCheckout(t *testing.T) {
	d := &gateDriver{entered: make(chan string), release: make(chan struct{})}
	r := harness.NewRunner(d, 0)
	job := harness.Job{Key: "run-1", Instance: "ni-1", Node: textStep(t), Binding: harness.Binding{Model: "m", SessionScope: harness.ScopeNodeInstance}, Dir: t.TempDir()}
	results := make(chan string, 1)
	go func() { results <- outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})) }()
	testkit.Recv(t, d.entered)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s := outcome(run(r, ctx, job, `{"text":"draft"}`, &recorder{})); s != `{"status":"error","code":"refusal","reason":"declared_failure"}` {
		t.Fatalf("cancelled checkout: %s", s)
	}
	r.CloseRun("run-1")
	d.release <- struct{}{}
	if s := testkit.Recv(t, results); s != wantVerified {
		t.Fatalf("in-flight execution: %s", s)
	}
	go func() { results <- outcome(run(r, context.Background(), job, `{"text":"draft"}`, &recorder{})) }()
	if s := testkit.Recv(t, d.entered); s != "" {
		t.Fatalf("a closed run's session was resumed: %q", s)
	}
	d.release <- struct{}{}
	testkit.Recv(t, results)
}
