package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// logRig is a running run of a fresh backend, claimed by the ledger l.
func logRig(t *testing.T) (st store.Store, b *cluster.Backend, l *cluster.Ledger, ref engine.RunRef) {
	t.Helper()
	st = store.NewMemory()
	b = cluster.New(cluster.Config{Store: st, Engine: true})
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.Apply(ctxFor("a"), applyP(goldenGraph, "k1", nil)); err != nil {
		t.Fatal(err)
	}
	l = b.Ledger("p")
	runs, err := l.Running(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("running %v %v", runs, err)
	}
	if err := l.Claim(context.Background(), runs[0]); err != nil {
		t.Fatal(err)
	}
	return st, b, l, runs[0]
}

func dispatchN(t *testing.T, l *cluster.Ledger, ref engine.RunRef, from, n uint64) {
	t.Helper()
	var ds []engine.Dispatch
	for x := from; x < from+n; x++ {
		ds = append(ds, engine.Dispatch{Ref: fmt.Sprint("x", x), Dispatch: reduce.Dispatch{
			NodeInstance: x, Execution: x, Occurrence: reduce.Occurrence{Node: "worker"}, Attempt: 1, Input: json.RawMessage("null")}})
	}
	if err := l.Dispatch(context.Background(), ref, ds); err != nil {
		t.Fatal(err)
	}
}

func verified(out string) worker.Outcome {
	return worker.Outcome{Status: "verified", Output: json.RawMessage(out)}
}

// summary is a snapshot's history as comparable lines, by execution.
func summary(t *testing.T, l *cluster.Ledger, ref engine.RunRef) []string {
	t.Helper()
	snap, err := l.Snapshot(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range append(slices.Clone(snap.History.Ended), snap.History.Executions...) {
		o := ""
		if x.Outcome != nil {
			o = string(x.Outcome.Status) + string(x.Outcome.Output)
		}
		out = append(out, fmt.Sprintf("%d %s %d %d %s", x.Execution, x.State, x.DispatchPosition, x.Position, o))
	}
	slices.Sort(out)
	return out
}

// stateRecord reads the tenant's state record as JSON fields.
func stateRecord(t *testing.T, st store.Store) (map[string]json.RawMessage, uint64) {
	t.Helper()
	var m map[string]json.RawMessage
	var version uint64
	err := st.View(context.Background(), func(tx store.ReadTx) error {
		c, _, err := tx.Cluster("t:a")
		version = c.Version
		if err == nil {
			err = json.Unmarshal(c.Data, &m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, version
}

// TestExecutionLogLeavesTheStateRecord: an ended execution leaves the
// state record for the run's execution log, so the record holds only the
// open executions however many have ended; a snapshot (through the
// ledger's cache or a fresh ledger) sees every execution.
func TestExecutionLogLeavesTheStateRecord(t *testing.T) {
	st, b, l, ref := logRig(t)
	ctx := context.Background()
	const n = 150 // more than two log chunks
	dispatchN(t, l, ref, 1, n)
	for x := uint64(1); x <= n; x += 7 {
		var ss []engine.Settlement
		for y := x; y < min(x+7, n+1); y++ {
			if y%10 != 3 {
				ss = append(ss, engine.Settlement{Execution: y, Outcome: verified(fmt.Sprint(y))})
			}
		}
		if err := l.Settle(ctx, ref, ss); err != nil {
			t.Fatal(err)
		}
		cached := summary(t, l, ref)
		if fresh := summary(t, b.Ledger("q"), ref); !slices.Equal(cached, fresh) {
			t.Fatalf("cached snapshot\n%v\nfresh\n%v", cached, fresh)
		}
		if len(cached) != n {
			t.Fatalf("%d executions, want %d", len(cached), n)
		}
	}
	m, _ := stateRecord(t, st)
	var open []json.RawMessage
	_ = json.Unmarshal(m["execs"], &open)
	if len(open) != n/10 || string(m["logged"]) != fmt.Sprint(n-n/10) {
		t.Fatalf("state record keeps %d executions, logged %s", len(open), m["logged"])
	}
}

// TestStateRecordWithEndedExecutionsStillLoads: a state record written
// before the execution log moved out of it (ended executions in execs,
// no logged count) snapshots the same history, and its run goes on.
func TestStateRecordWithEndedExecutionsStillLoads(t *testing.T) {
	st, b, l, ref := logRig(t)
	ctx := context.Background()
	dispatchN(t, l, ref, 1, 3)
	if err := l.Settle(ctx, ref, []engine.Settlement{{Execution: 1, Outcome: verified(`"one"`)}}); err != nil {
		t.Fatal(err)
	}
	want := summary(t, l, ref)
	// Rewrite the record in the old form: every execution in execs, and
	// the log empty (the old store had none).
	m, version := stateRecord(t, st)
	err := st.Update(ctx, func(tx store.Tx) error {
		key := "\x00log\x00" + ref.RunID + "\x000"
		c, _, err := tx.Cluster(key)
		if err != nil {
			return err
		}
		if err := tx.PutCluster(key, store.Cluster{Version: c.Version + 1, Data: []byte("[]")}); err != nil {
			return err
		}
		var logged, open []json.RawMessage
		_ = json.Unmarshal(c.Data, &logged)
		_ = json.Unmarshal(m["execs"], &open)
		m["execs"], _ = json.Marshal(append(logged, open...))
		delete(m, "logged")
		data, _ := json.Marshal(m)
		return tx.PutCluster("t:a", store.Cluster{Version: version + 1, Data: data})
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh := b.Ledger("q")
	if got := summary(t, fresh, ref); !slices.Equal(got, want) {
		t.Fatalf("old record\n%v\nwant\n%v", got, want)
	}
	if err := fresh.Claim(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Settle(ctx, ref, []engine.Settlement{{Execution: 3, Outcome: verified(`"three"`)}}); err != nil {
		t.Fatal(err)
	}
	got := summary(t, fresh, ref)
	if len(got) != 3 || got[2] == want[2] || got[0] != want[0] {
		t.Fatalf("after a settlement %v", got)
	}
}

// TestCompactionDeletesTheExecutionLog: compacting a superseded run
// deletes its execution log with it.
func TestCompactionDeletesTheExecutionLog(t *testing.T) {
	st, b, l, ref := logRig(t)
	ctx := context.Background()
	dispatchN(t, l, ref, 1, logChunkForTest+1)
	var ss []engine.Settlement
	for x := uint64(1); x <= logChunkForTest+1; x++ {
		ss = append(ss, engine.Settlement{Execution: x, Outcome: verified("null")})
	}
	if err := l.Settle(ctx, ref, ss); err != nil {
		t.Fatal(err)
	}
	chunks := func() (n int) {
		_ = st.View(ctx, func(tx store.ReadTx) error {
			for k := range 3 {
				if _, ok, _ := tx.Cluster(fmt.Sprintf("\x00log\x00%s\x00%d", ref.RunID, k)); ok {
					n++
				}
			}
			return nil
		})
		return n
	}
	if n := chunks(); n != 2 {
		t.Fatalf("%d log chunks, want 2", n)
	}
	if err := l.Finish(ctx, ref, reduce.Terminal{Status: reduce.TerminalFailed, Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resubmit(ctxFor("a"), protocol.ResubmitParams{IfGeneration: 1, IfRunID: ref.RunID, IdempotencyKey: "k2"}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Compact(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v", n, err)
	}
	if n := chunks(); n != 0 {
		t.Fatalf("%d log chunks left after compaction", n)
	}
}

// logChunkForTest is the number of executions of a log chunk.
const logChunkForTest = 64
