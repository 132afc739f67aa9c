package capsule_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// mapGraph is examples/map-items.json's shape: a map of builtin.echo@1
// over state.items, promoting every item's result.
func mapGraph() M {
	body := step("each", "builtin.echo@1", binds(ib("text", sel("item", "text"))), writes(wOut("each", "text", "results")))
	return spec(seq("main",
		mapOver("fan", body, sel("state", "items"), 1024, promote("results")),
		M{"kind": "succeed", "name": "done", "output": tRec(req("results", tArr(tStr))), "bindings": []M{fromState("results")}},
	), "items")
}

func mapInput(n int) string {
	items := make([]M, n)
	for i := range items {
		items[i] = M{"text": fmt.Sprint("item-", i)}
	}
	b, _ := json.Marshal(M{"text": "-", "items": items})
	return string(b)
}

// BenchmarkMap1024 drives a 1,024-item map of builtin.echo@1 from apply
// to finished on the in-memory store (goal: well under 5 s per op).
func BenchmarkMap1024(b *testing.B) {
	benchmarkMap(b, 1024)
}

// BenchmarkMap64 is the same with 64 items, to show how cost grows.
func BenchmarkMap64(b *testing.B) {
	benchmarkMap(b, 64)
}

// startRun starts a capsule on st and applies graphJSON with input in.
func startRun(b *testing.B, st store.Store, graphJSON []byte, in string) (*capsule.Capsule, *capsule.Backend) {
	c, err := capsule.New(capsule.Options{Store: st, Log: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	c.Start()
	be := c.Backend()
	input, _ := protocol.NormalizeValue([]byte(in))
	if _, err := be.Apply(local(), protocol.ApplyParams{Graph: graphJSON, Input: input, HasInput: true, IdempotencyKey: key()}); err != nil {
		b.Fatal(err)
	}
	return c, be
}

func benchmarkMap(b *testing.B, n int) { benchmarkMapOn(b, n, store.NewMemory) }

func benchmarkMapOn(b *testing.B, n int, open func() store.Store) {
	g, in := mapGraph(), mapInput(n)
	graphJSON := mustJSON(b, g)
	for b.Loop() {
		c, be := startRun(b, open(), graphJSON, in)
		guard := time.NewTimer(5 * time.Minute)
		for {
			changed := be.Store().Changed()
			r, err := be.Get(local(), protocol.GetParams{})
			if err != nil {
				b.Fatal(err)
			}
			if r.Status.Phase == protocol.PhaseFinished {
				if r.TerminalResult == nil || r.TerminalResult.Status != "succeeded" {
					b.Fatalf("terminal %s", mustJSON(b, r.TerminalResult))
				}
				break
			}
			select {
			case <-changed:
			case <-guard.C:
				b.Fatal("stuck")
			}
		}
		guard.Stop()
		_ = c.Close()
	}
}

// BenchmarkMap1024SQLite is BenchmarkMap1024 on the durable store
// (sync normal, a fresh data directory per op).
func BenchmarkMap1024SQLite(b *testing.B) {
	benchmarkMapOn(b, 1024, openSQLite(b))
}

// longRunGraph is one long run: two nested loops of 100 iterations around
// a seq of three builtin.echo@1 steps (30,000 steps in all), each step
// writing its output back to state.text.
func longRunGraph() M {
	body := seqP("body", []opts{promote("text")},
		step("a", "builtin.echo@1", writes(wOut("a", "text", "text"))),
		step("b", "builtin.echo@1", writes(wOut("b", "text", "text"))),
		step("c", "builtin.echo@1", writes(wOut("c", "text", "text"))))
	inner := loop("inner", body, nil, 100, promote("text"))
	return spec(seq("main", loop("outer", inner, nil, 100, promote("text")), succeedText("done")))
}

// Windows of BenchmarkLongRun: the settled steps [early, early+window)
// and [late, late+window) of the run (-longrun.late moves the second).
const (
	longEarly  = 10
	longWindow = 100
)

var longLate = flag.Uint64("longrun.late", 10000, "BenchmarkLongRun: the first step of the late window")

// BenchmarkLongRun measures the time per settled step of one long run
// (longRunGraph) at step 10 and at step 10,000: one op drives a fresh run
// from apply until step late+window has settled, timing the two windows.
// Reported: early-µs/step, late-µs/step and late/early (the goal is ≤
// 1.5: a step costs the same however long the run already is). A settled
// step is a node_begin and a node_end, so steps are counted as half the
// store's events after the run's admission event. Run with:
//
//	go test -run '^$' -bench LongRun -benchtime 1x ./capsule/
func BenchmarkLongRun(b *testing.B) {
	eachStore(b, benchmarkLongRun)
}

func benchmarkLongRun(b *testing.B, open func() store.Store) {
	benchmarkWindows(b, open, mustJSON(b, longRunGraph()), `{"text":"x"}`, *longLate)
}

// benchmarkWindows drives a fresh run of graphJSON on input in per op
// until step late+window has settled, timing the settled steps [early,
// early+window) and [late, late+window), and reports their µs/step and
// late/early.
func benchmarkWindows(b *testing.B, open func() store.Store, graphJSON []byte, in string, late uint64) {
	var dEarly, dLate time.Duration
	for b.Loop() {
		c, be := startRun(b, open(), graphJSON, in)
		wait := stepWaiter(b, be.Store())
		wait(longEarly)
		t0 := time.Now()
		wait(longEarly + longWindow)
		dEarly += time.Since(t0)
		wait(late)
		t0 = time.Now()
		wait(late + longWindow)
		dLate += time.Since(t0)
		_ = c.Close()
	}
	perStep := func(d time.Duration) float64 {
		return float64(d.Microseconds()) / float64(b.N*longWindow)
	}
	b.ReportMetric(perStep(dEarly), "early-µs/step")
	b.ReportMetric(perStep(dLate), "late-µs/step")
	b.ReportMetric(float64(dLate)/float64(dEarly), "late/early")
}

// eachStore runs bench as the sub-benchmarks memory and sqlite-normal,
// with a function that opens a fresh store of that kind.
func eachStore(b *testing.B, bench func(b *testing.B, open func() store.Store)) {
	b.Run("memory", func(b *testing.B) { bench(b, store.NewMemory) })
	b.Run("sqlite-normal", func(b *testing.B) { bench(b, openSQLite(b)) })
}

// openSQLite opens fresh SQLite stores (sync normal) in temporary
// directories of b.
func openSQLite(b *testing.B) func() store.Store {
	return func() store.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Sync: sqlite.SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
}

var (
	wideItems = flag.Int("widemap.items", 1024, "BenchmarkWideMap: the map's items (at most 1,024)")
	parOuter  = flag.Int("parloop.outer", 5, "BenchmarkParLoop: the outer loop's iterations (of 100 inner ones)")
)

// BenchmarkWideMap measures the time per settled item of one map of
// builtin.echo@1 over -widemap.items items (mapGraph, 1,024 by default)
// at item 10 and at the last hundred items but twenty (the run's tail,
// where fewer items are active, is left out): the goal is a late/early
// ratio near 1 (an item costs the same however many have settled).
// Run with:
//
//	go test -run '^$' -bench WideMap -benchtime 1x ./capsule/
func BenchmarkWideMap(b *testing.B) {
	n := *wideItems
	if n < 2*longWindow+40 || n > 1024 {
		b.Fatalf("-widemap.items %d: from %d to 1,024 (the ceiling of maxItems)", n, 2*longWindow+40)
	}
	eachStore(b, func(b *testing.B, open func() store.Store) {
		benchmarkWindows(b, open, mustJSON(b, mapGraph()), mapInput(n), uint64(n-longWindow-20))
	})
}

// parLoopGraph is two nested loops, outer iterations around 100, around
// a quorum-of-one par of two builtin.echo@1 steps: every iteration has a
// loser (voided while active, or settled too late to count).
func parLoopGraph(outer int) M {
	race := par("race", M{"kind": "quorum", "count": 1},
		step("a", "builtin.echo@1", writes(wOut("a", "text", "text"))),
		step("b", "builtin.echo@1", writes(wOut("b", "text", "text"))))
	race["promotedStatePaths"] = [][]string{{"text"}}
	inner := loop("inner", race, nil, 100, promote("text"))
	return spec(seq("main", loop("outer", inner, nil, outer, promote("text")), succeedText("done")))
}

// BenchmarkParLoop is BenchmarkWideMap for parLoopGraph(-parloop.outer):
// two executions per iteration, timed at step 10 and at the last hundred
// steps but twenty.
//
//	go test -run '^$' -bench ParLoop -benchtime 1x ./capsule/
func BenchmarkParLoop(b *testing.B) {
	n := *parOuter * 200 // steps
	if n < 2*longWindow+40 {
		b.Fatalf("-parloop.outer %d: at least 2", *parOuter)
	}
	eachStore(b, func(b *testing.B, open func() store.Store) {
		benchmarkWindows(b, open, mustJSON(b, parLoopGraph(*parOuter)), `{"text":"x"}`, uint64(n-longWindow-20))
	})
}

// stepWaiter returns a function that blocks until the store's only run
// has settled at least n steps, reading only the store's last sequence.
func stepWaiter(b *testing.B, st store.Store) func(n uint64) {
	return func(n uint64) {
		guard := time.NewTimer(30 * time.Minute)
		defer guard.Stop()
		for {
			changed := st.Changed()
			var count uint64
			err := st.View(context.Background(), func(tx store.ReadTx) error {
				var err error
				count, err = tx.LastSeq()
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			if count > 0 && (count-1)/2 >= n {
				return
			}
			select {
			case <-changed:
			case <-guard.C:
				b.Fatalf("stuck at %d events", count)
			}
		}
	}
}
