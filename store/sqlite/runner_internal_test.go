package sqlite

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// panicsWithBoom panics where a stack shows it.
func panicsWithBoom() { panic(errors.ErrUnsupported) }

// TestRunnerRaisesAPanicInItsCaller: a panic in a function given to run
// is raised again in run's caller, carrying its value and the stack where
// it began, and the runner's goroutine goes on running what comes next.
func TestRunnerRaisesAPanicInItsCaller(t *testing.T) {
	r := newRunner(1)
	defer r.close()
	got := func() (p any) {
		defer func() { p = recover() }()
		_ = r.run(testkit.Bounded(t), panicsWithBoom)
		return nil
	}()
	p, ok := got.(*Panic)
	if !ok || p.Value != errors.ErrUnsupported || !errors.Is(p, errors.ErrUnsupported) ||
		!strings.Contains(string(p.Stack), "panicsWithBoom") || !strings.Contains(p.Error(), "panicsWithBoom") {
		t.Fatalf("the caller recovered %#v", got)
	}
	ran := false
	if err := r.run(testkit.Bounded(t), func() { ran = true }); err != nil || !ran {
		t.Fatalf("after a panic: run = %v, ran %v", err, ran)
	}
}

// TestRunnerEndsItsCallerOnGoexit: runtime.Goexit in a function given to
// run (what a test's FailNow calls) ends the caller's goroutine, not only
// the runner's, and a new goroutine of the runner takes the place of the
// one that ended.
func TestRunnerEndsItsCallerOnGoexit(t *testing.T) {
	r := newRunner(1)
	defer r.close() // returns: every goroutine, the replacement included, ends
	ended, after := make(chan struct{}), false
	go func() {
		defer close(ended)
		_ = r.run(testkit.Bounded(t), runtime.Goexit)
		after = true
	}()
	testkit.Recv(t, ended)
	if after {
		t.Fatal("the caller went on after its function called runtime.Goexit")
	}
	ran := false
	if err := r.run(testkit.Bounded(t), func() { ran = true }); err != nil || !ran {
		t.Fatalf("after a Goexit: run = %v, ran %v", err, ran)
	}
}

// TestRunnerGivesUpWhenItsContextEnds: a caller whose context ends while
// every goroutine of the runner is busy gets the context's error, and its
// function never runs, then or later.
func TestRunnerGivesUpWhenItsContextEnds(t *testing.T) {
	r := newRunner(1)
	busy, release := make(chan struct{}), make(chan struct{})
	go func() { _ = r.run(testkit.Bounded(t), func() { close(busy); <-release }) }()
	testkit.Recv(t, busy)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if err := r.run(ctx, func() { ran = true }); err != context.Canceled {
		t.Fatalf("run with an ended context = %v", err)
	}
	close(release)
	r.close() // every function given to it has returned
	if ran {
		t.Fatal("the function of a run that gave up ran")
	}
}
