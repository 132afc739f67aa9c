package sqlite

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Transactions run on the store's own goroutines (one writer, and
// maxReaders for Views, each taking a connection of the read pool), not on
// their callers'. A SQLite statement runs deep in transpiled C, whose
// frames grow a goroutine's stack to tens of KiB: on a caller's goroutine
// that is a copy of its stack at its first transactions, and again after
// every collection that shrank the stack while the goroutine waited. With
// thousands of requests and subscriptions in flight, each on a goroutine
// of its own, that copying and the stacks' memory grew with the load; on
// the store's few goroutines it is bounded by their number.

// runner runs functions on a fixed number of goroutines of its own.
type runner struct {
	work chan func()
	wg   sync.WaitGroup
}

// newRunner starts a runner of n goroutines.
func newRunner(n int) *runner {
	r := &runner{work: make(chan func())}
	for range n {
		r.spawn()
	}
	return r
}

func (r *runner) spawn() {
	r.wg.Add(1)
	go func() {
		exited := true
		defer func() {
			if exited {
				// A function ended this goroutine with runtime.Goexit
				// (and its caller with it): a new one takes its place.
				r.spawn()
			}
			r.wg.Done()
		}()
		for job := range r.work {
			job()
		}
		exited = false
	}()
}

// outcome is how a function given to run ended.
type outcome struct {
	panicked *Panic
	exited   bool // runtime.Goexit
}

// Panic is a panic of a transaction's function, raised again in the
// caller of View or Update with the stack of the store's goroutine where
// it began (the caller's own stack ends at the call).
type Panic struct {
	Value any
	Stack []byte
}

func (p *Panic) Error() string {
	return fmt.Sprintf("%v\n\n[a store transaction's function panicked on the store's goroutine:]\n%s", p.Value, p.Stack)
}

// Unwrap is the panic's value when it is an error.
func (p *Panic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// run runs fn on one of r's goroutines once one is free and returns when
// fn has: a panic in fn is raised again in the caller (as a *Panic), and
// a runtime.Goexit in fn (a test's FailNow) ends the caller's goroutine
// too.
// It gives up, without running fn, if ctx is done before a goroutine is
// free. run must not be called after close.
func (r *runner) run(ctx context.Context, fn func()) error {
	done := make(chan outcome, 1)
	job := func() {
		returned := false
		defer func() {
			switch {
			case returned:
				done <- outcome{}
			default:
				if p := recover(); p != nil {
					done <- outcome{panicked: &Panic{Value: p, Stack: debug.Stack()}}
				} else {
					done <- outcome{exited: true}
					// Goexit goes on, and recover stops nothing.
				}
			}
		}()
		fn()
		returned = true
	}
	select {
	case r.work <- job:
	case <-ctx.Done():
		return ctx.Err()
	}
	o := <-done
	switch {
	case o.panicked != nil:
		panic(o.panicked)
	case o.exited:
		runtime.Goexit()
	}
	return nil
}

// close stops r's goroutines once they are idle and waits for them.
func (r *runner) close() {
	close(r.work)
	r.wg.Wait()
}
