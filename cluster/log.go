package cluster

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/store"
)

// A run's execution log is kept outside the tenant's state record, so
// that a commit costs the same however many executions the run has
// already ended: the state keeps the open executions and the count of
// logged ones (Logged), and the ended executions, in the order they
// ended, are appended to log records of logChunk executions each, stored
// as cluster records under logKey (the i-th ended execution is in chunk
// i / logChunk). An ended execution never changes, so the log is
// append-only and a reader may keep what it decoded (logCache).
const logChunk = 64

// logKey is the store key of chunk k of run's execution log. Run ids are
// unique in a store (one global counter mints them) and no tenant key
// starts with "\x00", so it collides with no other record.
func logKey(runID string, k uint64) string {
	return "\x00log\x00" + runID + "\x00" + strconv.FormatUint(k, 10)
}

// appendLog appends st.ended to the run's execution log.
func appendLog(tx store.Tx, st *state) error {
	for len(st.ended) > 0 {
		k := st.Logged / logChunk
		recs, version, err := readChunk(tx, st.RunID, k)
		if err != nil {
			return err
		}
		if uint64(len(recs)) != st.Logged%logChunk {
			return fmt.Errorf("cluster: execution log of %s: chunk %d has %d records, want %d", st.RunID, k, len(recs), st.Logged%logChunk)
		}
		n := min(logChunk-len(recs), len(st.ended))
		recs = append(recs, st.ended[:n]...)
		st.ended = st.ended[n:]
		st.Logged += uint64(n)
		data, err := json.Marshal(recs)
		if err != nil {
			return err
		}
		if err := tx.PutCluster(logKey(st.RunID, k), store.Cluster{Version: version + 1, Data: data}); err != nil {
			return err
		}
	}
	return nil
}

// deleteLog deletes run's execution log (its chunks are numbered from 0
// without a gap).
func deleteLog(tx store.Tx, runID string) error {
	for k := uint64(0); ; k++ {
		_, ok, err := tx.Cluster(logKey(runID, k))
		if err != nil || !ok {
			return err
		}
		if err := tx.DeleteCluster(logKey(runID, k)); err != nil {
			return err
		}
	}
}

// readChunk reads chunk k of run's execution log (none if absent).
func readChunk(tx store.ReadTx, runID string, k uint64) ([]execRecord, uint64, error) {
	c, ok, err := tx.Cluster(logKey(runID, k))
	if err != nil || !ok {
		return nil, 0, err
	}
	var recs []execRecord
	if err := json.Unmarshal(c.Data, &recs); err != nil {
		return nil, 0, fmt.Errorf("cluster: corrupt execution log of %s: %w", runID, err)
	}
	return recs, c.Version, nil
}

// logCache keeps, per supervised run, the executions of its log read so
// far, as the reducer sees them: a snapshot reads only the chunks logged
// since. It holds at most maxCachedLogs runs.
type logCache struct {
	mu   sync.Mutex
	runs map[engine.RunRef][]reduce.Execution
}

const maxCachedLogs = 256

// read returns the first n executions of ref's log, reading from tx what
// the cache does not hold. The result is shared (a History.Ended: the
// cache only ever appends to it) and must not be changed.
func (lc *logCache) read(tx store.ReadTx, ref engine.RunRef, n uint64) ([]reduce.Execution, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	have := lc.runs[ref]
	if uint64(len(have)) > n {
		have = nil // not the log this cache read: start over
	}
	for k := uint64(len(have)) / logChunk; uint64(len(have)) < n; k++ {
		recs, _, err := readChunk(tx, ref.RunID, k)
		if err != nil {
			return nil, err
		}
		from := uint64(len(have)) - k*logChunk
		if uint64(len(recs)) <= from {
			return nil, fmt.Errorf("cluster: execution log of %s: chunk %d ends at %d", ref.RunID, k, len(recs))
		}
		for _, r := range recs[from:] {
			x, err := r.execution()
			if err != nil {
				return nil, err
			}
			have = append(have, x)
		}
	}
	have = have[:n]
	if lc.runs == nil || len(lc.runs) >= maxCachedLogs {
		lc.runs = map[engine.RunRef][]reduce.Execution{}
	}
	lc.runs[ref] = have
	return have[:n:n], nil
}

// forget drops ref's cached log.
func (lc *logCache) forget(ref engine.RunRef) {
	lc.mu.Lock()
	delete(lc.runs, ref)
	lc.mu.Unlock()
}

// execution is the reducer's view of an execution record.
func (e *execRecord) execution() (reduce.Execution, error) {
	x := reduce.Execution{
		DispatchPosition: e.Begin,
		NodeInstance:     e.Instance,
		Execution:        e.Exec,
		Occurrence:       reduce.Occurrence{Node: e.Node, MapIndices: e.Map},
		Attempt:          e.Attempt,
		Input:            e.Input,
		State:            reduce.StateActive,
	}
	switch {
	case e.Interrupted:
		x.State, x.Position = reduce.StateInterrupted, e.End
	case e.Void != "":
		x.State, x.Position, x.VoidReason = reduce.StateVoided, e.End, reduce.VoidReason(e.Void)
	case e.End != 0:
		var o worker.Outcome
		if err := json.Unmarshal(e.Outcome, &o); err != nil {
			return reduce.Execution{}, err
		}
		x.State, x.Position = reduce.StateSettled, e.End
		x.Outcome = &reduce.Outcome{Status: reduce.OutcomeStatus(o.Status), Output: o.Output, Signals: o.Signals, Diagnostic: o.Diagnostic, Code: o.Code, Reason: o.Reason}
	}
	return x, nil
}
