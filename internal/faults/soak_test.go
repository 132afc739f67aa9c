package faults

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
)

var soak = flag.Int("faults.soak", 0, "kill/restart cycles of TestRandomSIGKILL (default $OECP_SOAK_CYCLES, else 5)")

// soakCycles is how many times TestRandomSIGKILL kills the server.
func soakCycles() int {
	if *soak > 0 {
		return *soak
	}
	if n, err := strconv.Atoi(os.Getenv("OECP_SOAK_CYCLES")); err == nil && n > 0 {
		return n
	}
	return 5
}

// soakClients mutate the cluster concurrently in every cycle.
const soakClients = 3

// napGraph is a run of one builtin.sleep@1 step named node that sleeps
// the input's ms, then ends with the input's text.
func napGraph(node string) json.RawMessage {
	str := `{"required":true,"type":{"kind":"string"}}`
	ms := `{"required":true,"type":{"kind":"integer"}}`
	return json.RawMessage(fmt.Sprintf(`{"profile":"openengine.graph.full/v1","initialInput":{"kind":"record","fields":{"text":%[1]s,"ms":%[2]s}},
		"policy":{"policy":"policy.default@1","default":"deny"},
		"root":{"kind":"seq","name":"main","state":{"kind":"record","fields":{"text":%[1]s,"ms":%[2]s}},"promotedStatePaths":[],"children":[
		{"kind":"step","name":%[3]q,"worker":"builtin.sleep@1","input":{"kind":"record","fields":{"ms":%[2]s}},"output":{"kind":"null"},
		 "inputBindings":[{"target":["ms"],"value":{"source":"state","path":["ms"]}}],"writeBindings":[],"timeoutMs":60000,"attempts":2},
		{"kind":"succeed","name":"done","output":{"kind":"record","fields":{"text":%[1]s}},"bindings":[{"target":["text"],"value":{"source":"state","path":["text"]}}]}]}}`, str, ms, node))
}

// acked is one mutation the server acknowledged: its params (one of
// them set) and its receipt.
type acked struct {
	apply      *client.ApplyParams
	update     *client.UpdateParams
	resubmit   *client.ResubmitParams
	runID      string
	generation int64
}

// send sends a's mutation and returns its receipt.
func (a acked) send(ctx context.Context, c *client.Conn) (r acked, deduped bool, err error) {
	r = a
	switch {
	case a.apply != nil:
		var res *protocol.ApplyResult
		if res, err = c.Apply(ctx, *a.apply); err == nil {
			r.runID, r.generation, deduped = *res.RunID, *res.Generation, res.Deduped
		}
	case a.update != nil:
		var res *protocol.UpdateResult
		if res, err = c.Update(ctx, *a.update); err == nil {
			r.runID, r.generation, deduped = res.RunID, res.Generation, res.Deduped
		}
	default:
		var res *protocol.ResubmitResult
		if res, err = c.Resubmit(ctx, *a.resubmit); err == nil {
			r.runID, r.generation, deduped = res.RunID, res.Generation, res.Deduped
		}
	}
	return r, deduped, err
}

// mutator is one client of one cycle.
type mutator struct {
	c     *client.Conn
	rng   *rand.Rand
	name  string
	acked func(acked)
}

// next picks a mutation the cluster's phase may admit: the first apply of
// an empty cluster; on a running run mostly a label update, sometimes an
// apply of another graph (admitted only while the run holds); a resubmit
// of a finished run. Runs sleep a few milliseconds, so kills land while
// steps run.
func (m mutator) next(g *protocol.GetResult, key string) acked {
	var gen int64
	if g.Status.ObservedGeneration != nil {
		gen = *g.Status.ObservedGeneration
	}
	switch {
	case g.Status.Phase == protocol.PhaseFinished:
		return acked{resubmit: &client.ResubmitParams{IfGeneration: gen, IfRunID: *g.Status.CurrentRunID, IdempotencyKey: key}}
	case g.Status.Phase == protocol.PhaseRunning && m.rng.IntN(4) > 0:
		return acked{update: &client.UpdateParams{Labels: map[string]string{"by": key}, IfGeneration: gen, IdempotencyKey: key}}
	}
	return acked{apply: &client.ApplyParams{Graph: napGraph(fmt.Sprintf("nap%d", m.rng.IntN(4))),
		Input: json.RawMessage(fmt.Sprintf(`{"text":%q,"ms":%d}`, key, m.rng.IntN(20))), IfGeneration: &gen, IdempotencyKey: key}}
}

// run sends mutations, each with a fresh idempotency key, until the
// connection fails. Refusals (a conflict, a phase that does not admit the
// mutation) are expected under concurrency and acknowledge nothing.
func (m mutator) run(t *testing.T) {
	ctx := guarded(t)
	for n := 0; ; n++ {
		g, err := m.c.Get(ctx, client.GetParams{})
		if err != nil {
			return
		}
		a, _, err := m.next(g, fmt.Sprintf("%s-%d", m.name, n)).send(ctx, m.c)
		var refused *client.Error
		switch {
		case err == nil:
			m.acked(a)
		case !errors.As(err, &refused):
			return // the server is gone
		}
	}
}

// TestRandomSIGKILL kills the server with SIGKILL at a random point of
// concurrent idempotent mutations, several times. Afterwards every
// acknowledged mutation, sent again with its key, answers deduped with
// its original receipt, and the history has no cursor gap: the events of
// all runs are numbered 1..N without a hole or a repeat.
func TestRandomSIGKILL(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d cycles", seed, soakCycles())
	rng := rand.New(rand.NewPCG(seed, 0))
	args := []string{"--data", t.TempDir() + "/data"}
	var mu sync.Mutex
	var all []acked
	for cycle := range soakCycles() {
		srv := serve(t, args...)
		killAt := int32(1 + rng.IntN(60))
		var count atomic.Int32
		trigger := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for i := range soakClients {
			m := mutator{c: dial(t, srv), rng: rand.New(rand.NewPCG(seed, uint64(cycle*soakClients+i+1))), name: fmt.Sprintf("c%d-%d", cycle, i),
				acked: func(a acked) {
					mu.Lock()
					all = append(all, a)
					mu.Unlock()
					if count.Add(1) >= killAt {
						once.Do(func() { close(trigger) })
					}
				}}
			wg.Go(func() { m.run(t) })
		}
		select {
		case <-trigger:
		case <-time.After(hangGuard):
			t.Fatalf("cycle %d: stuck before %d acknowledged mutations:\n%s", cycle, killAt, srv.stderr())
		}
		_ = srv.stop(t, syscall.SIGKILL)
		testkit.Wait(t, &wg)
	}
	c := dial(t, serve(t, args...))
	replayAll(t, c, all)
	checkContiguous(t, c)
}

// replayAll sends every acknowledged mutation again: each must answer
// deduped with its original run and generation.
func replayAll(t *testing.T, c *client.Conn, all []acked) {
	t.Helper()
	ctx := guarded(t)
	for _, a := range all {
		r, deduped, err := a.send(ctx, c)
		if err != nil || !deduped || r.runID != a.runID || r.generation != a.generation {
			t.Fatalf("replay of an acknowledged mutation (run %s, generation %d): deduped=%v run=%s generation=%d err=%v",
				a.runID, a.generation, deduped, r.runID, r.generation, err)
		}
	}
	t.Logf("%d acknowledged mutations replayed deduped", len(all))
}

// checkContiguous force-stops the current run if it has not finished, then
// reads every run's events (runs are run-1..run-K) and requires their
// cursors to be exactly 1..the cluster's latest cursor.
func checkContiguous(t *testing.T, c *client.Conn) {
	t.Helper()
	ctx := guarded(t)
	g, err := c.Get(ctx, client.GetParams{})
	if err != nil || g.Status.CurrentRunID == nil {
		t.Fatalf("get: %v %+v", err, g)
	}
	if g.TerminalResult == nil {
		_, _ = c.Stop(ctx, client.StopParams{Mode: "force", IfGeneration: *g.Status.ObservedGeneration, IdempotencyKey: "final-stop"})
	}
	if g, err = c.Get(ctx, client.GetParams{}); err != nil || g.AtCursor == nil {
		t.Fatalf("get: %v", err)
	}
	last, err := cursorNumber(*g.AtCursor)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := strconv.Atoi(strings.TrimPrefix(*g.Status.CurrentRunID, "run-"))
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	for k := 1; k <= runs; k++ {
		for _, ev := range history(t, c, "run-"+strconv.Itoa(k), finished) {
			n, err := cursorNumber(ev.Cursor)
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, n)
		}
	}
	slices.Sort(seen)
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("cursor %d where %d was due (%d runs, latest cursor %d)", n, i+1, runs, last)
		}
	}
	if len(seen) != last {
		t.Fatalf("%d events, latest cursor %d", len(seen), last)
	}
	t.Logf("%d runs, %d events, no gap", runs, last)
}

func cursorNumber(cursor string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(cursor, "cursor-"))
	if err != nil {
		return 0, fmt.Errorf("cursor %q: %w", cursor, err)
	}
	return n, nil
}
