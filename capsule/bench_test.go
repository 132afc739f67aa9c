package capsule_test

import (
	"context"
	"encoding/json"
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

func benchmarkMap(b *testing.B, n int) { benchmarkMapOn(b, n, store.NewMemory) }

func benchmarkMapOn(b *testing.B, n int, open func() store.Store) {
	g, in := mapGraph(), mapInput(n)
	graphJSON := mustJSON(b, g)
	for b.Loop() {
		c, err := capsule.New(capsule.Options{Store: open(), Log: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		c.Start()
		be := c.Backend()
		input, _ := protocol.NormalizeValue([]byte(in))
		if _, err := be.Apply(local(), protocol.ApplyParams{Graph: graphJSON, Input: input, HasInput: true, IdempotencyKey: key()}); err != nil {
			b.Fatal(err)
		}
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
	benchmarkMapOn(b, 1024, func() store.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Dir: b.TempDir(), Sync: sqlite.SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		return st
	})
}
