package cluster

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// state is one tenant's cluster, stored as the JSON blob of its
// store.Cluster record. Every field a protocol promise depends on lives
// here (or in the store's other tables), never only in process memory.
type state struct {
	Phase      string `json:"phase"`
	Generation int64  `json:"generation,omitempty"`
	// Spec is the committed GraphSpec in wire (canonical field) order.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Identity is the compiled-IR identity of Spec: an unchanged identity
	// makes apply a no-op, a changed one starts a run.
	Identity string `json:"identity,omitempty"`
	RunID    string `json:"runId,omitempty"`
	// Cursor is the sequence of the current run's latest record.
	Cursor uint64      `json:"cursor,omitempty"`
	Op     operational `json:"op"`
	// Frontier is the turn id of the failed execution the run holds on
	// (what retry targets), until it is retried; History is the reason
	// retry reports when there is none (exhausted | success | consumed).
	Frontier string `json:"frontier,omitempty"`
	History  string `json:"history,omitempty"`
	// PendingRetry is the retry turn reserved by retry and not yet
	// dispatched.
	PendingRetry string `json:"pendingRetry,omitempty"`
	// RetrySeq mints retry-N turn ids (executions' turn ids are xN, so
	// the two never collide).
	RetrySeq uint64 `json:"retrySeq,omitempty"`
	// CleanupHeld makes delete hold the deleting phase until runtime
	// cleanup is confirmed. Only tests set it: the backend has no runtime
	// cleanup to wait for.
	CleanupHeld bool `json:"cleanupHeld,omitempty"`
	// Runs are every run admitted since the cluster was last empty; delete
	// tombstones them all.
	Runs []string `json:"runs,omitempty"`

	// Execs are the run's open executions, in dispatch order; with the
	// Logged executions of the run's execution log (records of their own,
	// see log.go) they are the log the engine's reducer folds and the
	// run's only execution model. An execution is in flight while the run
	// is running and it has not ended (settled, crashed, voided or
	// interrupted); a force stop ends the run with its in-flight
	// executions cut off by one bookmark each. A record written before the
	// log moved out of it keeps ended executions in Execs too. Grants are
	// the retry grants, Held the execution the run holds on, Terminal the
	// run's result.
	Execs []execRecord `json:"execs,omitempty"`
	// Logged is the number of the run's executions in its execution log,
	// in the order they ended.
	Logged   uint64                   `json:"logged,omitempty"`
	Grants   []uint64                 `json:"grants,omitempty"`
	Held     uint64                   `json:"held,omitempty"`
	Terminal *protocol.TerminalResult `json:"terminal,omitempty"`

	// ended are the executions that ended in this transaction, removed
	// from Execs; save appends them to the execution log.
	ended []execRecord
}

// execRecord is one execution of the current run, as the engine's ledger
// recorded it.
type execRecord struct {
	Exec     uint64          `json:"x"`
	Instance uint64          `json:"i"`
	Node     string          `json:"n"`
	Map      []uint64        `json:"m,omitempty"`
	Attempt  uint64          `json:"a"`
	Input    json.RawMessage `json:"in"`
	Ref      string          `json:"r"`
	// Begin and End are the cursors of the execution's node_begin and of
	// the record that ended it (0 while it is open).
	Begin   uint64          `json:"d"`
	End     uint64          `json:"e,omitempty"`
	Outcome json.RawMessage `json:"o,omitempty"`
	Void    string          `json:"v,omitempty"`
	// Interrupted: a graceful shutdown of the engine ended it (End is
	// the cursor of its fault); the reducer dispatches its attempt again.
	Interrupted bool `json:"int,omitempty"`
	// Group is the process group its worker started, while it is open.
	Group *worker.Group `json:"g,omitempty"`
}

// exec finds execution id.
func (st *state) exec(id uint64) (int, bool) {
	for i := range st.Execs {
		if st.Execs[i].Exec == id {
			return i, true
		}
	}
	return 0, false
}

type operational struct {
	Labels   map[string]string `json:"labels,omitempty"`
	LogLevel string            `json:"logLevel,omitempty"`
	// Gate is the dispatch gate (the wire's dispatchState): new
	// executions start only while it is active.
	Gate     string `json:"dispatch,omitempty"`
	StopMode string `json:"stopMode,omitempty"`
}

func freshOperational() operational {
	return operational{Labels: map[string]string{}, LogLevel: "info", Gate: protocol.DispatchActive}
}

// counterRun is the store's global counter that mints run-N.
const counterRun = "run"

// History reasons of NO_RETRYABLE_FRONTIER.
const (
	reasonExhausted = "exhausted"
	reasonSuccess   = "success"
	reasonActive    = "active"
	reasonConsumed  = "consumed"
)

func emptyState() *state { return &state{Phase: protocol.PhaseEmpty} }

// load reads a tenant's state and its record version.
func load(tx store.ReadTx, tenant string) (*state, uint64, error) {
	c, ok, err := tx.Cluster(tenant)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return emptyState(), 0, nil
	}
	st, err := decodeState(tenant, c.Data)
	return st, c.Version, err
}

// decodeState decodes a tenant's state record.
func decodeState(tenant string, data []byte) (*state, error) {
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("cluster: corrupt state of tenant %q: %w", tenant, err)
	}
	if st.Op.Labels == nil {
		st.Op.Labels = map[string]string{}
	}
	return st, nil
}

// save writes st as the next version of the tenant's record.
func save(tx store.Tx, tenant string, st *state, version uint64) error {
	if err := appendLog(tx, st); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return tx.PutCluster(tenant, store.Cluster{Version: version + 1, Data: data})
}

// hasRun reports whether a run is current (running, finished or deleting).
func (st *state) hasRun() bool { return st.RunID != "" }

func (st *state) generation() *int64 {
	if st.Generation == 0 {
		return nil
	}
	g := st.Generation
	return &g
}

func (st *state) runID() *string {
	if st.RunID == "" {
		return nil
	}
	r := st.RunID
	return &r
}

func (st *state) cursor() *string {
	if st.Cursor == 0 {
		return nil
	}
	c := cursorString(st.Cursor)
	return &c
}

func (st *state) operational() protocol.OperationalStatus {
	return protocol.OperationalStatus{
		Labels:        maps.Clone(st.Op.Labels),
		LogLevel:      st.Op.LogLevel,
		DispatchState: st.Op.Gate,
		StopMode:      st.Op.StopMode,
		InFlight:      uint32(st.inFlight()),
	}
}

// inFlight counts the executions in flight: none unless the run is
// running.
func (st *state) inFlight() int {
	if st.Phase != protocol.PhaseRunning {
		return 0
	}
	n := 0
	for i := range st.Execs {
		if st.Execs[i].End == 0 {
			n++
		}
	}
	return n
}

// status is the wire ClusterStatus of st.
func (st *state) status() protocol.ClusterStatus {
	s := protocol.ClusterStatus{
		Phase:              st.Phase,
		ObservedGeneration: st.generation(),
		CurrentRunID:       st.runID(),
		AtCursor:           st.cursor(),
	}
	if st.hasRun() {
		op := st.operational()
		s.Operational = &op
	}
	return s
}

// gateState is the dispatch gate retry reports (empty and deleting
// clusters count as stopped).
func (st *state) gateState() string {
	if !st.hasRun() || st.Phase == protocol.PhaseDeleting || st.Op.Gate == "" {
		return protocol.DispatchStopped
	}
	return st.Op.Gate
}

// cursorString is the opaque wire form of an event sequence: cursor-N,
// where N is the store's global event sequence (one store-wide counter,
// as the reference testkit mints them).
func cursorString(seq uint64) string { return "cursor-" + strconv.FormatUint(seq, 10) }

// parseCursor returns the sequence of a cursor this backend minted.
func parseCursor(c string) (uint64, bool) {
	s, ok := strings.CutPrefix(c, "cursor-")
	if !ok || s == "" || (s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func runString(n uint64) string { return "run-" + strconv.FormatUint(n, 10) }
