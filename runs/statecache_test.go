package runs

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/oecp/oecp/store"
)

// Every test of the package checks that a cached run state is exactly
// its record's decoding.
func init() { checkStateCache = true }

// TestStateCacheSeesEveryWrite: a run state decoded or saved once is not
// reused after another writer replaced the record, after a save whose
// transaction rolled back, or after the caller changed the copy it was
// handed.
func TestStateCacheSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	const tk, runID = "n:\"cache\"", "r1"
	load := func() *runState {
		t.Helper()
		var st *runState
		if err := s.View(ctx, func(tx store.ReadTx) error {
			var err error
			st, _, _, err = loadRun(tx, tk, runID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	first := &runState{Title: "t", Phase: PhaseRunning, Execs: []execution{{Ref: "x1", Node: "a", Input: json.RawMessage(`"<in>"`)}}}
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateRun(tk, store.Run{ID: runID}); err != nil {
			return err
		}
		return saveRun(tx, tk, runID, first, 0)
	}); err != nil {
		t.Fatal(err)
	}
	st := load()
	st.Execs[0].Node, st.Phase = "changed", PhaseStopping
	st.Execs = append(st.Execs, execution{Ref: "x2"})
	if st := load(); st.Phase != PhaseRunning || len(st.Execs) != 1 || st.Execs[0].Node != "a" {
		t.Fatalf("after the caller changed its copy: %+v", st)
	}
	// Another writer replaces the record.
	other := &runState{Title: "t", Phase: PhaseFinished, Terminal: json.RawMessage(`{"status":"failed"}`)}
	data, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutRunState(tk, runID, store.Record{Version: 2, Data: data})
	}); err != nil {
		t.Fatal(err)
	}
	if st := load(); st.Phase != PhaseFinished || len(st.Execs) != 0 {
		t.Fatalf("after another writer: %+v", st)
	}
	// A save whose transaction rolls back leaves the committed state.
	errRollback := errors.New("rollback")
	err = s.Update(ctx, func(tx store.Tx) error {
		st, version, _, err := loadRun(tx, tk, runID)
		if err != nil {
			return err
		}
		st.Phase = PhaseAdmitted
		if err := saveRun(tx, tk, runID, st, version); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("rollback: %v", err)
	}
	if st := load(); st.Phase != PhaseFinished {
		t.Fatalf("after a rolled-back save: %+v", st)
	}
}

// TestStateCacheStringNotUTF8: a state whose string is not valid UTF-8 is
// read back as its record decodes, not as it was saved.
func TestStateCacheStringNotUTF8(t *testing.T) {
	ctx := context.Background()
	s := store.NewMemory()
	const tk, runID = "n:\"cache\"", "r-utf8"
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateRun(tk, store.Run{ID: runID}); err != nil {
			return err
		}
		return saveRun(tx, tk, runID, &runState{Title: "a\xffb", Phase: PhaseAdmitted}, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx store.ReadTx) error {
		st, _, _, err := loadRun(tx, tk, runID)
		if err == nil && st.Title != "a\ufffdb" {
			t.Errorf("title %q", st.Title)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
