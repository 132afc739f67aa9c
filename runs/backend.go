package runs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/changefeed"
	"github.com/oecp/oecp/runs/evidence"
	"github.com/oecp/oecp/runs/graphcache"
	"github.com/oecp/oecp/runs/live"
	"github.com/oecp/oecp/runs/logbuf"
	"github.com/oecp/oecp/store"
)

// Config configures a Backend. Zero values mean the defaults.
type Config struct {
	// Store is the ledger, shared with the v1 clusters (default: a new
	// in-memory store).
	Store store.Store
	// Shared serves one run namespace to every tenant (--tenancy shared);
	// otherwise each connection tenant sees only its own runs.
	Shared bool
	// Agents runs agent nodes and checks runtime plans against the host's
	// harnesses. Without it every submission is refused (no harness).
	Agents Agents
	// Workspaces gives runs a git workspace of their source and admits
	// git delivery (--repos); nil records the source only.
	Workspaces Workspaces
	// Verify runs the production verifier (default VerifyDirect).
	Verify Verify
	Log    *slog.Logger
	// MaxActivePerTenant bounds a tenant's unfinished runs
	// (--max-active-runs-per-tenant; 0: unbounded): a submission past it
	// is answered SERVER_BUSY, a replay of a recorded one still answers.
	MaxActivePerTenant int
}

// Backend serves the run/* methods over the store and is the engine's
// ledger of native runs (Ledger). It is safe for concurrent use.
type Backend struct {
	cfg   Config
	store store.Store

	subSeq atomic.Uint64
	live   *live.Hub
	relay  *live.Relay
	logs   *logbuf.Buffer
	seeds  seedCache
	wake   signals
	prep   preparations
	cps    checkpoints
	graphs graphcache.Cache

	// group queues the native-run writes for a group commit (group.go).
	group committer
	// changes names each run written to the engine's feeds (package
	// runs/changefeed).
	changes changefeed.Feeds

	// evidence queues agents' raw evidence (package runs/evidence).
	evidence *evidence.Recorder
}

// runKey names one run: its tenant key and run id.
type runKey struct{ tk, runID string }

// ref is the engine's name of the run.
func (k runKey) ref() engine.RunRef { return engine.RunRef{Tenant: k.tk, RunID: k.runID} }

// New builds a backend.
func New(cfg Config) *Backend {
	if cfg.Store == nil {
		cfg.Store = store.NewMemory()
	}
	if cfg.Verify == nil {
		cfg.Verify = VerifyDirect
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	b := &Backend{cfg: cfg, store: cfg.Store, live: live.NewHub(), relay: live.NewRelay(cfg.Store), evidence: evidence.NewRecorder(cfg.Store, cfg.Log)}
	b.logs = logbuf.New(b.writeLogs, cfg.Log)
	if st := cfg.Store; store.IsShared(st) {
		b.wake.foreign = func() <-chan struct{} { return remoteChanges(st) }
	}
	return b
}

// Close ends the wait of watches for other replicas' commits (a watch
// still open is then woken only by its own run's writes: the server is
// stopped first), stops the workspace preparations in flight and waits
// for pending log lines and agent evidence to be written; evidence
// reported after it is refused and counted as dropped. It does not close
// the store, which the host shares.
func (b *Backend) Close() {
	b.wake.close()
	b.prep.stop()
	b.relay.Stop()
	b.logs.Close()
	b.evidence.Close()
}

// TenantKey is the store key prefix of a connection tenant's runs.
func (b *Backend) TenantKey(tenant string) string {
	if b.cfg.Shared {
		return sharedTenantKey
	}
	return "n:" + strconv.Quote(tenant)
}

// OwnsTenantKey reports whether a store tenant key names native runs.
func OwnsTenantKey(tk string) bool {
	return len(tk) >= 2 && tk[0] == 'n' && (tk[1] == ':' || tk[1] == '*')
}

func (b *Backend) tenant(ctx context.Context) string { return b.TenantKey(identity.From(ctx).Tenant) }

func (b *Backend) nextSubscription(kind string) string {
	return "v2-" + kind + "-" + strconv.FormatUint(b.subSeq.Add(1), 10)
}

// Lookup failures; wire gives their protocol errors.
var (
	errNoRun    = errors.New("runs: no such run")
	errNoExec   = errors.New("runs: no such execution")
	errExecGone = errors.New("runs: execution is no longer active")
)

// orNoRun is err, a failed read, or errNoRun when the read found no run:
// a store that cannot serve (a connection the server killed) is never
// reported as a missing run.
func orNoRun(err error) error {
	if err != nil {
		return err
	}
	return errNoRun
}

// Submission conflicts, answered by Submit itself.
var errConflict, errKeyReused = errors.New("runs: run id is taken by a different submission"),
	errors.New("runs: submission key is taken by a different submission")

// wire maps an error to what the server answers: a store that cannot
// serve now (store.ErrUnavailable) is STORE_UNAVAILABLE.
func wire(err error) error {
	var rej *rejection
	var pe *protocol.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &rej):
		return rej.wire()
	case errors.Is(err, errSchema):
		return protocol.SchemaReason(err.Error())
	case errors.Is(err, errNoRun):
		return protocol.AppError(protocol.NotFound, "run was not found", nil)
	case errors.Is(err, errNoExec):
		return protocol.AppError(protocol.NotFound, "execution was not found", nil)
	case errors.Is(err, errExecGone):
		return protocol.AppError(protocol.Gone, protocol.MsgExecGone, nil)
	case errors.Is(err, store.ErrUnavailable):
		return protocol.Internal(protocol.StoreUnavailable)
	}
	return err
}

// SubmitResult is run/submit's result.
type SubmitResult struct {
	RunID string `json:"runId"`
}

// StatusResult is run/status's (and run/force's) result: the run's
// immutable summary and its status projection at AtCursor.
type StatusResult struct {
	RunID    string    `json:"runId"`
	Title    string    `json:"title"`
	Source   Source    `json:"source"`
	Size     string    `json:"size"`
	AtCursor string    `json:"atCursor"`
	Status   RunStatus `json:"status"`
}

// ListResult is run/list's result.
type ListResult struct {
	Runs []StatusResult `json:"runs"`
}

func project(runID string, st *runState) StatusResult {
	return StatusResult{RunID: runID, Title: st.Title, Source: st.Source, Size: st.Size, AtCursor: cursorString(st.Cursor), Status: st.status()}
}

// Submit admits a submission as run runID: decoded, checked and verified
// first (no effects), then committed in one transaction that answers a
// replay with the recorded run, refuses a run id or submission key already
// used for a different submission, or records the run.
func (b *Backend) Submit(ctx context.Context, runID string, raw json.RawMessage) (*SubmitResult, error) {
	if err := ValidRunID(runID); err != nil {
		return nil, protocol.SchemaReason(err.Error())
	}
	sub, graphRaw, err := decodeSubmission(raw, b.graphs.Decode)
	if err != nil {
		return nil, wire(err)
	}
	if err := admit(ctx, sub, b.cfg.Agents, b.cfg.Workspaces, b.graphs.Verify(graphRaw, b.cfg.Verify)); err != nil {
		return nil, wire(err)
	}
	seed, err := sub.Encode()
	if err != nil {
		return nil, err
	}
	digest := digestOf(seed)
	tk := b.tenant(ctx)
	res := &SubmitResult{}
	err = b.commit(ctx, runKey{}, func(tx store.Tx, _ []logbuf.Line) error {
		var err error
		res.RunID, err = commitSubmission(tx, tk, runID, sub, digest, seed, b.cfg.MaxActivePerTenant)
		return err
	})
	switch {
	case errors.Is(err, errConflict):
		return nil, protocol.AppError(protocol.RunConflict, protocol.MsgRunCAS, map[string]any{"currentRunId": runID})
	case errors.Is(err, errKeyReused):
		return nil, protocol.AppError(protocol.IdempotencyReuse, protocol.MsgIdempotencyReuse, map[string]any{"runId": res.RunID})
	case errors.Is(err, errTenantBusy):
		return nil, protocol.AppError(protocol.ServerBusy, protocol.MsgServerBusy, map[string]any{"maxActiveRunsPerTenant": b.cfg.MaxActivePerTenant})
	case err != nil:
		return nil, wire(err)
	}
	if res.RunID == runID {
		// The engine reads the run's submission next: it is the one
		// recorded (it encodes to the same seed).
		b.seeds.put(runKey{tk, runID}, sub)
		traceSubmitted(ctx, tk, runID)
		b.changes.Changed(runKey{tk, runID}.ref())
	}
	return res, nil
}

// commitSubmission is Submit's transaction. It returns the run id the
// submission is recorded under (another one for a replay under the same
// submission key); with errKeyReused that is the key's existing run. A
// new run is refused with errTenantBusy when the tenant already has
// maxActive unfinished runs (0: unbounded).
func commitSubmission(tx store.Tx, tk, runID string, sub *Submission, digest string, seed []byte, maxActive int) (string, error) {
	if st, _, ok, err := loadRun(tx, tk, runID); err != nil || ok {
		if err == nil && st.Digest != digest {
			err = errConflict
		}
		return runID, err
	}
	key := submissionPrefix + sub.SubmissionKey
	if r, ok, err := tx.Idempotency(tk, key); err != nil || ok {
		if err == nil && r.Fingerprint != digest {
			err = errKeyReused
		}
		return string(r.Result), err
	}
	unfinished, err := unfinishedOf(tx, tk)
	if err != nil {
		return "", err
	}
	if err := checkTenantActive(unfinished, maxActive); err != nil {
		return "", err
	}
	if err := tx.CreateRun(tk, store.Run{ID: runID, Seed: seed}); err != nil {
		return "", err
	}
	if err := tx.PutIdempotency(tk, key, store.Receipt{Fingerprint: digest, Result: []byte(runID)}); err != nil {
		return "", err
	}
	st := &runState{Title: sub.Title, Source: sub.Source, Size: sub.Runtime.Size, Digest: digest, Phase: PhaseAdmitted, Key: sub.SubmissionKey}
	if err := appendRecord(tx, tk, runID, st, record{Kind: recAdmitted}); err != nil {
		return "", err
	}
	if err := tx.SetIndexEntry(indexKey(tk), runID, st.Cursor); err != nil {
		return "", err
	}
	if err := tx.SetIndexEntry(activeKey, activeEntry(tk, runID), st.Cursor); err != nil {
		return "", err
	}
	if err := setUnfinished(tx, tk, unfinished+1); err != nil {
		return "", err
	}
	return runID, saveRun(tx, tk, runID, st, 0)
}

// Status projects one run.
func (b *Backend) Status(ctx context.Context, runID string) (*StatusResult, error) {
	tk := b.tenant(ctx)
	var res StatusResult
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, ok, err := loadRun(tx, tk, runID)
		if err != nil || !ok {
			return orNoRun(err)
		}
		res = project(runID, st)
		return nil
	})
	if err != nil {
		return nil, wire(err)
	}
	return &res, nil
}

// List projects every run of the caller's tenant, newest first.
func (b *Backend) List(ctx context.Context) (*ListResult, error) {
	tk := b.tenant(ctx)
	res := &ListResult{Runs: []StatusResult{}}
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		ix, err := tx.IndexEntries(indexKey(tk))
		if err != nil {
			return err
		}
		for i := len(ix) - 1; i >= 0; i-- {
			st, _, ok, err := loadRun(tx, tk, ix[i].Entry)
			if err != nil || !ok {
				return orNoRun(err)
			}
			res.Runs = append(res.Runs, project(ix[i].Entry, st))
		}
		return nil
	})
	if err != nil {
		return nil, wire(err)
	}
	return res, nil
}

// Force stops a run: it records the force request (the result is the
// status projected at it: stopping, with the executions still active),
// ends every active execution as refusal, and finishes the run failed
// with force_stopped, all in one transaction. The engine then cancels the
// run's workers; their late outcomes are not recorded. Forcing a finished
// run changes nothing and answers its current status.
func (b *Backend) Force(ctx context.Context, runID string) (*StatusResult, error) {
	tk := b.tenant(ctx)
	var res StatusResult
	forced := false
	err := b.update(ctx, tk, runID, func(tx store.Tx, st *runState) error {
		forced = false
		if st.Phase == PhaseFinished {
			res = project(runID, st)
			return nil
		}
		forced = true
		st.Phase = PhaseStopping
		if err := appendRecord(tx, tk, runID, st, record{Kind: recForce}); err != nil {
			return err
		}
		res = project(runID, st)
		refusal := errorOutcome(worker.CodeRefusal, worker.ReasonDeclaredFailure)
		return stopRun(tx, tk, runID, st, refusal, protocol.TerminalResult{Status: "failed", Reason: reasonForceStopped})
	})
	if err != nil {
		return nil, wire(err)
	}
	if forced {
		traceForced(tk, runID)
	}
	b.closeRun(tk, runID)
	return &res, nil
}

// stopRun ends every active execution of the run with outcome and
// finishes it with t.
func stopRun(tx store.Tx, tk, runID string, st *runState, outcome json.RawMessage, t protocol.TerminalResult) error {
	for i := range st.Execs {
		if st.Execs[i].End == nil {
			if err := endExecution(tx, tk, runID, st, &st.Execs[i], ending{Outcome: outcome}); err != nil {
				return err
			}
		}
	}
	return finishRun(tx, tk, runID, st, t)
}

// closeRun lets the agents drop a finished run's state.
func (b *Backend) closeRun(tk, runID string) {
	b.seeds.drop(runKey{tk, runID})
	b.prep.forget(runKey{tk, runID})
	if c, ok := b.cfg.Agents.(RunCloser); ok {
		c.CloseRun(tk, runID)
	}
}

// update runs fn on a run's state in one transaction (a group commit),
// after appending the run's pending log lines, and saves the state. An
// unknown run is errNoRun.
func (b *Backend) update(ctx context.Context, tk, runID string, fn func(tx store.Tx, st *runState) error) error {
	return b.commit(ctx, runKey{tk, runID}, func(tx store.Tx, lines []logbuf.Line) error {
		st, version, ok, err := loadRun(tx, tk, runID)
		if err != nil || !ok {
			return orNoRun(err)
		}
		from := st.Cursor
		if lines, err = logbuf.Fenced(tx, lines); err != nil {
			return err
		}
		if err := appendLogs(tx, tk, runID, st, lines); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(tx, st); err != nil {
				return err
			}
		}
		if st.Phase != PhaseFinished && st.Cursor != from {
			// The unfinished-run index carries each run's latest cursor:
			// the engine's version of the run.
			if err := tx.SetIndexEntry(activeKey, activeEntry(tk, runID), st.Cursor); err != nil {
				return err
			}
		}
		return saveRun(tx, tk, runID, st, version)
	})
}

// endExecution ends an active execution, settled (e.Outcome), voided
// (e.Void) or interrupted (e.Interrupted), with its record.
func endExecution(tx store.Tx, tk, runID string, st *runState, x *execution, e ending) error {
	rec := record{Kind: recCompleted, Execution: x.Ref, Detail: e.Outcome}
	switch {
	case e.Interrupted:
		rec = record{Kind: recInterrupted, Execution: x.Ref}
	case e.Void != "":
		reason, err := json.Marshal(e.Void)
		if err != nil {
			return err
		}
		rec = record{Kind: recVoided, Execution: x.Ref, Detail: reason}
	}
	x.End, x.Group = &e, nil
	if err := appendRecord(tx, tk, runID, st, rec); err != nil {
		return err
	}
	x.End.At = st.Cursor
	return nil
}

// finishRun records the run's terminal result and drops it from the
// unfinished runs.
func finishRun(tx store.Tx, tk, runID string, st *runState, t protocol.TerminalResult) error {
	detail, err := protocol.Marshal(t)
	if err != nil {
		return err
	}
	st.Phase, st.Terminal = PhaseFinished, detail
	if err := appendRecord(tx, tk, runID, st, record{Kind: recTerminal, Detail: detail}); err != nil {
		return err
	}
	if err := markFinished(tx, tk, runID); err != nil {
		return err
	}
	// Counted before the run leaves the unfinished runs (a tenant counted
	// from them counts it).
	unfinished, err := unfinishedOf(tx, tk)
	if err != nil {
		return err
	}
	if err := setUnfinished(tx, tk, unfinished-1); err != nil {
		return err
	}
	return tx.SetIndexEntry(activeKey, activeEntry(tk, runID), 0)
}
