package runs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Where a native run lives in the store. Every key of a tenant starts with
// its tenant key ("n:" + the quoted tenant, or "n*" when all tenants
// share one namespace), which no v1 cluster key can equal:
//
//	runs table      (tenant key, runId)        seed = the admitted Submission
//	events          (tenant key, runId)        one record each (record)
//	run states      (tenant key, runId)        the mutable runState, versioned
//	index           tenant key + "#runs"       the tenant's runs (runId → admission cursor)
//	index           activeKey                  every unfinished run (tenant key NUL
//	                                           runId → the run's latest cursor)
//	idempotency     (tenant key, "submission/" + submissionKey)
const (
	activeKey        = "\x00native-runs"
	submissionPrefix = "submission/"
	sharedTenantKey  = "n*"
)

// stateKey names a run's state in the decoded-state cache.
func stateKey(tk, runID string) string { return tk + "/" + runID }
func indexKey(tk string) string        { return tk + indexSuffix }

// indexSuffix ends the key of a tenant's run index.
const indexSuffix = "#runs"

// Run phases.
const (
	PhaseAdmitted = "admitted"
	PhaseRunning  = "running"
	PhaseStopping = "stopping"
	PhaseFinished = "finished"
)

// Record kinds of a run's event log.
const (
	recAdmitted  = "run_admitted"
	recStarted   = "node_started"
	recCompleted = "node_completed"
	recVoided    = "execution_voided"
	// recInterrupted: a graceful shutdown of the engine cancelled the
	// execution; the same node is dispatched again after the restart.
	recInterrupted = "execution_interrupted"
	recForce       = "force_stop_requested"
	recTerminal    = "terminal"
	recLog         = "log"
)

// Terminal reasons the host itself records.
const reasonForceStopped = "force_stopped"

// runIDRE is the run id a host may assign: 1..128 bytes of letters,
// digits, '.', '_' and '-', starting with a letter or digit.
var (
	runIDRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	clusterRunRE = regexp.MustCompile(`^run-[0-9]+$`)
)

// ValidRunID reports why id cannot name a native run: it must match
// `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$` and must not have the shape of a
// v1 cluster run id (`run-` followed by digits).
func ValidRunID(id string) error {
	if !runIDRE.MatchString(id) {
		return fmt.Errorf("runId must be 1..128 characters of [A-Za-z0-9._-] starting with a letter or digit")
	}
	if clusterRunRE.MatchString(id) {
		return fmt.Errorf("runId %q has the shape of a v1 cluster run id (run-<digits>)", id)
	}
	return nil
}

// runState is a run's mutable durable state (its clusters-table record).
type runState struct {
	Title  string `json:"title"`
	Source Source `json:"source"`
	Size   string `json:"size"`
	Digest string `json:"digest"`
	Phase  string `json:"phase"`
	// Execs are the run's dispatches in dispatch order.
	Execs []execution `json:"execs,omitempty"`
	// Terminal is the encoded TerminalResult of a finished run (raw, so
	// that a null output survives the record's round trip).
	Terminal json.RawMessage `json:"terminal,omitempty"`
	// Cursor is the sequence of the run's latest record of any kind.
	Cursor uint64 `json:"cursor"`
	// Logs counts the run's log records (bounded by maxLogRecords).
	Logs uint64 `json:"logs,omitempty"`
	// Key is the submission key (retention deletes its receipt).
	Key string `json:"key,omitempty"`
	// SpentUSD is the cost the run's agents reported (Spending).
	SpentUSD float64 `json:"spentUsd,omitempty"`
}

// execution is one dispatch: its public ref and node, the reducer's
// identities and input, the dispatch position, and how it ended.
type execution struct {
	Ref     string          `json:"ref"`
	Node    string          `json:"node"`
	Indices []uint64        `json:"idx,omitempty"`
	IDs     [2]uint64       `json:"ids"` // node instance, execution
	Input   json.RawMessage `json:"input"`
	At      uint64          `json:"at"`
	End     *ending         `json:"end,omitempty"`
	// Group is the process group its worker started, while it is
	// active: a restarted engine kills what is left of it before it
	// settles the execution as crash.
	Group *worker.Group `json:"group,omitempty"`
}

// ending is how an execution ended: settled with an outcome, voided, or
// interrupted by a graceful shutdown (neither failed nor succeeded).
type ending struct {
	At          uint64          `json:"at"`
	Outcome     json.RawMessage `json:"outcome,omitempty"`
	Void        string          `json:"void,omitempty"`
	Interrupted bool            `json:"interrupted,omitempty"`
}

// RunStatus is the public phase projection: admitted; running or stopping
// with every active execution; finished with the terminal result.
type RunStatus struct {
	Phase            string             `json:"phase"`
	ActiveExecutions *[]ActiveExecution `json:"activeExecutions,omitempty"`
	TerminalResult   json.RawMessage    `json:"terminalResult,omitempty"`
}

// ActiveExecution is one running execution: the ref logs and attach take,
// and its node.
type ActiveExecution struct {
	Execution string `json:"execution"`
	Node      string `json:"node"`
}

func (st *runState) status() RunStatus {
	s := RunStatus{Phase: st.Phase}
	switch st.Phase {
	case PhaseRunning, PhaseStopping:
		active := []ActiveExecution{}
		for _, e := range st.Execs {
			if e.End == nil {
				active = append(active, ActiveExecution{Execution: e.Ref, Node: e.Node})
			}
		}
		s.ActiveExecutions = &active
	case PhaseFinished:
		s.TerminalResult = st.Terminal
	}
	return s
}

func (st *runState) active() int {
	n := 0
	for _, e := range st.Execs {
		if e.End == nil {
			n++
		}
	}
	return n
}

func (st *runState) exec(id uint64) *execution {
	for i := range st.Execs {
		if st.Execs[i].IDs[1] == id {
			return &st.Execs[i]
		}
	}
	return nil
}

func (st *runState) execByRef(ref string) *execution {
	for i := range st.Execs {
		if st.Execs[i].Ref == ref {
			return &st.Execs[i]
		}
	}
	return nil
}

// cursorString is the opaque wire form of an event sequence.
func cursorString(seq uint64) string { return "v2:" + strconv.FormatUint(seq, 10) }

// parseCursor reads a cursor this backend minted; "v2:0" is the position
// before a run's first record.
func parseCursor(c string) (uint64, bool) {
	s, ok := strings.CutPrefix(c, "v2:")
	if !ok || s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// loadRun reads a run's state and its record version.
func loadRun(tx store.ReadTx, tk, runID string) (*runState, uint64, bool, error) {
	r, ok, err := tx.RunState(tk, runID)
	if err != nil || !ok {
		return nil, 0, false, err
	}
	if st := cachedState(stateKey(tk, runID), r.Data); st != nil {
		return st, r.Version, true, nil
	}
	st, err := decodeState(r.Data)
	if err != nil {
		return nil, 0, false, fmt.Errorf("runs: corrupt state of run %q: %w", runID, err)
	}
	states.Put(stateKey(tk, runID), slices.Clone(r.Data), st)
	return st, r.Version, true, nil
}

// saveRun writes st as the next version of the run's record.
func saveRun(tx store.Tx, tk, runID string, st *runState, version uint64) error {
	data, err := encodeState(st)
	if err != nil {
		return err
	}
	if err := tx.PutRunState(tk, runID, store.Record{Version: version + 1, Data: data}); err != nil {
		return err
	}
	// Should the transaction not commit, the record keeps other bytes
	// and the entry is never used.
	if decodesToItself(data) {
		states.Put(stateKey(tk, runID), data, st)
	}
	return nil
}

// appendRecord appends rec to the run's log, with the run's status after
// it unless it is a log record, and advances st.Cursor to it.
func appendRecord(tx store.Tx, tk, runID string, st *runState, rec record) error {
	if rec.Kind != recLog {
		s, err := protocol.Marshal(st.status())
		if err != nil {
			return err
		}
		rec.Status = s
	}
	body, err := protocol.Marshal(rec)
	if err != nil {
		return err
	}
	ev, err := tx.AppendEvent(tk, runID, func(uint64) ([]byte, error) { return body, nil })
	if err != nil {
		return err
	}
	st.Cursor = ev.Seq
	return nil
}

// record is the body of one event. Status is the run's status projection
// after the record (every kind but log); Detail is the kind's payload: an
// outcome, a void reason, the terminal result or a log record.
type record struct {
	Kind      string          `json:"kind"`
	Execution string          `json:"execution,omitempty"`
	Detail    json.RawMessage `json:"detail,omitempty"`
	Status    json.RawMessage `json:"status,omitempty"`
}

func activeEntry(tk, runID string) string { return tk + "\x00" + runID }

func splitActive(entry string) (tk, runID string) {
	tk, runID, _ = strings.Cut(entry, "\x00")
	return tk, runID
}

// signals wakes the readers of one run (watch, logs) after each write for
// it, so that a commit wakes only its own run's readers rather than every
// reader of every run. A reader takes the run's channel (wait), or arms a
// call (arm), before it reads, and waits on it when it found nothing new;
// every write path of a run (Backend.update, and the submission that
// creates it) notifies after its commit, so a missed wake-up cannot
// happen.
//
// On a shared store other replicas' commits notify no run here. There a
// call is also armed with the store's wake-up for those commits
// (foreign): a channel taken before the call was armed, so before the
// reader's read, and closed by any such commit after it. One goroutine
// waits on it while calls are armed and fires them all when it closes.
// A call fired by its run's write, or taken back, leaves both; one fired
// by another replica's commit stays with its run until its reader arms
// again or goes away (tail.close).
type signals struct {
	mu sync.Mutex
	m  map[runKey]*signal
	// foreign, when set, returns the store's channel for other
	// replicas' commits (remoteChanges); nil on a store of this process.
	foreign func() <-chan struct{}
	remote  remoteCalls
	closed  bool // Backend.Close: no waiting on foreign commits starts
}

// remoteCalls are the calls armed with other replicas' next commit. While
// calls is not empty, one goroutine (awaitForeign) waits on ch or on
// idle, which is closed when calls is emptied by disarm or notify, and
// by close.
type remoteCalls struct {
	calls map[*armedCall]struct{}
	ch    <-chan struct{}
	idle  chan struct{}
}

// signal is one run's pending wake-up: the channel its blocked readers
// wait on, and the calls its parked readers armed.
type signal struct {
	ch    chan struct{}
	calls []*armedCall
}

// armedCall is a call armed with a run's signal: fired once the run was
// written after it was armed, and then wake (once set) is called.
type armedCall struct {
	fired atomic.Bool
	wake  atomic.Pointer[func()]
	// at is the call's index in its run's calls while it is there
	// (guarded by signals.mu), so that taking it back costs the same
	// however many readers the run has.
	at int
}

// setWake makes f the function a fire calls. A fire that came before it
// calls nothing: the caller checks fired after setWake.
func (a *armedCall) setWake(f func()) { a.wake.Store(&f) }

func (a *armedCall) fire() {
	a.fired.Store(true)
	if w := a.wake.Load(); w != nil {
		(*w)()
	}
}

// entry is k's pending wake-up, made if there is none; s.mu is held.
func (s *signals) entry(k runKey) *signal {
	if s.m == nil {
		s.m = map[runKey]*signal{}
	}
	e, ok := s.m[k]
	if !ok {
		e = &signal{}
		s.m[k] = e
	}
	return e
}

// wait returns a channel closed at k's next notify.
func (s *signals) wait(k runKey) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(k)
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	return e.ch
}

// arm returns a call fired at k's next notify (and, on a shared store, at
// another replica's next commit), calling wake (if not nil) on the
// notifier's goroutine or awaitForeign's, so wake must not block.
func (s *signals) arm(k runKey, wake func()) *armedCall {
	a := &armedCall{}
	if wake != nil {
		a.setWake(wake)
	}
	var ch <-chan struct{}
	if s.foreign != nil {
		ch = s.foreign() // taken before a is armed, so before the reader's read
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(k)
	a.at = len(e.calls)
	e.calls = append(e.calls, a)
	if ch != nil && !s.closed {
		r := &s.remote
		if r.calls == nil {
			r.calls = map[*armedCall]struct{}{}
		}
		r.calls[a] = struct{}{}
		if r.ch == nil {
			r.ch, r.idle = ch, make(chan struct{})
			go s.awaitForeign(r.ch, r.idle)
		}
	}
	return a
}

// awaitForeign fires every call armed with other replicas' commits once
// ch closes, unless idle closes first (no call is armed any more). The
// calls armed after it took them start another wait.
func (s *signals) awaitForeign(ch <-chan struct{}, idle chan struct{}) {
	select {
	case <-ch:
	case <-idle:
		return
	}
	s.mu.Lock()
	r := &s.remote
	if r.idle != idle {
		s.mu.Unlock()
		return // emptied meanwhile
	}
	calls := r.calls
	*r = remoteCalls{}
	s.mu.Unlock()
	for a := range calls {
		a.fire()
	}
}

// unarmRemote takes a out of the calls armed with other replicas'
// commits, ending their wait once none is left; s.mu is held.
func (s *signals) unarmRemote(a *armedCall) {
	r := &s.remote
	if _, ok := r.calls[a]; !ok {
		return
	}
	delete(r.calls, a)
	if len(r.calls) == 0 {
		close(r.idle)
		*r = remoteCalls{}
	}
}

// disarm takes back a call armed for k, fired or not, so that a reader
// that is gone (or has armed another) leaves nothing behind for a run
// that may never be written again.
func (s *signals) disarm(k runKey, a *armedCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unarmRemote(a)
	e, ok := s.m[k]
	if !ok {
		return
	}
	// a.at may be stale (a notify took the run's calls since); then a
	// is not at it.
	if i, n := a.at, len(e.calls); i < n && e.calls[i] == a {
		last := e.calls[n-1]
		e.calls[i], last.at = last, i
		e.calls[n-1] = nil
		e.calls = e.calls[:n-1]
	}
	if e.ch == nil && len(e.calls) == 0 {
		delete(s.m, k)
	}
}

// close ends the wait for other replicas' commits: the calls armed with
// them are not fired by them any more (a reader still waiting then is
// woken only by its own run's writes), and none is armed with them after.
func (s *signals) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if r := &s.remote; r.idle != nil {
		close(r.idle)
		*r = remoteCalls{}
	}
}

func (s *signals) notify(k runKey) {
	s.mu.Lock()
	e, ok := s.m[k]
	if ok {
		delete(s.m, k)
		for _, a := range e.calls {
			s.unarmRemote(a)
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if e.ch != nil {
		close(e.ch)
	}
	for _, a := range e.calls {
		a.fire()
	}
}
