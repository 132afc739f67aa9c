package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/lograte"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// Tenancy says how connection identities map to clusters.
type Tenancy int

const (
	// Isolated gives every tenant of the connection identity its own
	// cluster (--tenancy isolated, the default).
	Isolated Tenancy = iota
	// Shared serves one cluster to every identity (--tenancy shared).
	Shared
)

// sharedTenant is the store tenant key of the one cluster in Shared mode.
const sharedTenant = "*shared*"

// Config configures a Backend. Zero values mean the defaults.
type Config struct {
	// Store is the store (default store.NewMemory()).
	Store store.Store
	// Verifier admits graphs (default StructuralVerifier).
	Verifier Verifier
	Tenancy  Tenancy
	// GraphProfiles are advertised by initialize (nil advertises []).
	GraphProfiles []string
	// Logs and AgentAttach serve (and advertise) the logs and agent/attach
	// subscriptions, fed through the Ledger (Log, Output). When false the
	// methods answer INVALID_PHASE "Backend does not support ...".
	Logs        bool
	AgentAttach bool
	// QueueCapacity is the undelivered backlog at which one subscription
	// is closed with SLOW_CONSUMER (default 1024).
	QueueCapacity int
	// Engine says an engine supervises the runs (engine.Supervisor over
	// this Backend's Ledger). A changed apply then supersedes a
	// running run only while it is held (nothing in flight or pending),
	// ending it with a finished event (stop_mode force).
	Engine bool
	Log    *slog.Logger
}

// Backend is the v1 cluster backend: it implements server.Backend over a
// store.Store and a Verifier, and its Ledger is the port an execution
// engine drives runs through. It is safe for concurrent use.
type Backend struct {
	server.Unsupported // the native-v2 run/* methods are not served

	store    store.Store
	verifier Verifier
	cfg      Config

	subSeq atomic.Uint64 // sub-N, shared by watch, logs and agent/attach
	live   *liveHub
	relay  *liveRelay // live streams to and from other replicas
	feeds  watchFeeds // the shared reads of live watches
	// feedWindow is the events a run's feed keeps (and reads at most at
	// once).
	feedWindow int

	graphs graphCache // decoded committed specs by identity
	gets   getAnswers // get results by tenant, encoded once per record
	// unavailable bounds the repeats of the line a request answered
	// STORE_UNAVAILABLE logs: every client's retry meets the outage.
	unavailable lograte.Limiter
}

var _ server.Backend = (*Backend)(nil)

// New builds a backend.
func New(cfg Config) *Backend {
	if cfg.Store == nil {
		cfg.Store = store.NewMemory()
	}
	if cfg.Verifier == nil {
		cfg.Verifier = StructuralVerifier{}
	}
	if cfg.QueueCapacity <= 0 {
		cfg.QueueCapacity = protocol.SubscriptionQueueCapacity
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	b := &Backend{
		store:    cfg.Store,
		verifier: cfg.Verifier,
		cfg:      cfg,
		live:     newLiveHub(cfg.QueueCapacity),

		feedWindow: min(cfg.QueueCapacity, maxFeedWindow) + protocol.ReplayPageSize,
	}
	b.relay = newLiveRelay(cfg.Store, b)
	return b
}

// NewFixture is `--backend fixture`: the reference testkit's behaviour. It
// keeps everything in memory, mints run-N, cursor-N and sub-N from
// backend-wide counters, admits with the structural verifier and
// advertises graphProfiles [], logs false, agentAttach false, so that the
// goldens replay byte for byte.
func NewFixture(t Tenancy) *Backend {
	return New(Config{Store: store.NewMemory(), Verifier: StructuralVerifier{}, Tenancy: t})
}

// Store returns the backend's store.
func (b *Backend) Store() store.Store { return b.store }

// Close releases the store.
func (b *Backend) Close() error { return b.store.Close() }

// Ping reports whether the backend's store can read and commit a write
// now (its store's Ping); a store that cannot answers an error wrapping
// store.ErrUnavailable.
func (b *Backend) Ping(ctx context.Context) error { return b.store.Ping(ctx) }

// tenant maps a caller to its store tenant key.
func (b *Backend) tenant(ctx context.Context) string {
	return b.tenantKey(identity.From(ctx).Tenant)
}

// tenantKey is the store key of a connection tenant's cluster: "t:" and
// the tenant when isolated, one shared key when shared.
func (b *Backend) tenantKey(tenant string) string {
	if b.cfg.Tenancy == Shared {
		return sharedTenant
	}
	return "t:" + tenant
}

func (b *Backend) nextSubscription() string {
	return "sub-" + strconv.FormatUint(b.subSeq.Add(1), 10)
}

// view reads a tenant's state in one snapshot.
func (b *Backend) view(ctx context.Context, tenant string) (*state, error) {
	var st *state
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		var err error
		st, _, err = load(tx, tenant)
		return err
	})
	return st, b.wire(err)
}

// StoreUnavailable is the error.data.code of the -32603 error answered
// when the store cannot serve a request (store.ErrUnavailable: a full
// disk, a read-only or damaged database, an I/O error). Unlike
// INTERNAL_ERROR it is no bug: the same request may succeed once an
// operator fixes the storage, and nothing of it was committed.
const StoreUnavailable = protocol.StoreUnavailable

// wire maps an internal error to its wire error: protocol errors pass,
// cancellation is CANCELLED, a store that cannot serve is
// STORE_UNAVAILABLE, anything else is an internal error.
func (b *Backend) wire(err error) error {
	if err == nil {
		return nil
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errCancelled()
	}
	if errors.Is(err, store.ErrUnavailable) {
		b.unavailable.Log(b.cfg.Log, slog.LevelError, "", "cluster backend: store unavailable", "err", err)
		return protocol.Internal(StoreUnavailable)
	}
	b.cfg.Log.Error("cluster backend failure", "err", err)
	return fmt.Errorf("cluster: %w", err)
}

func errCancelled() *protocol.Error {
	return protocol.AppError(protocol.Cancelled, protocol.MsgCancelled, nil)
}

func errIdempotencyReuse() *protocol.Error {
	return protocol.AppError(protocol.IdempotencyReuse, protocol.MsgIdempotencyReuse, nil)
}

func errGeneration(st *state) *protocol.Error {
	return protocol.AppError(protocol.GenerationConflict, protocol.MsgGenerationCAS, map[string]any{"currentGeneration": st.generation()})
}

func errRun(st *state) *protocol.Error {
	return protocol.AppError(protocol.RunConflict, protocol.MsgRunCAS, map[string]any{"currentRunId": st.runID()})
}

// errGate is the INVALID_PHASE of a closed dispatch gate.
func errGate(state string) *protocol.Error {
	return protocol.AppError(protocol.InvalidPhase, protocol.MsgDispatchDenied, map[string]any{"dispatchState": state})
}

func errNoFrontier(reason string) *protocol.Error {
	return protocol.AppError(protocol.NoRetryableFrontier, protocol.MsgNoFrontier, map[string]any{"reason": reason})
}

// checkGeneration is the exact generation CAS: 0 asserts "no generation".
func checkGeneration(st *state, want int64) error {
	if st.Generation != want {
		return errGeneration(st)
	}
	return nil
}

// checkRun is the run CAS: nil asserts "no current run".
func checkRun(st *state, want *string) error {
	if (want == nil) != (st.RunID == "") || (want != nil && *want != st.RunID) {
		return errRun(st)
	}
	return nil
}

// replay looks up an idempotency key inside a transaction. It returns the
// stored result (hit) when the fingerprint matches, IDEMPOTENCY_REUSE when
// it does not, and (nil, nil) when the key is unused.
func replay(tx store.ReadTx, tenant, key, fp string) ([]byte, error) {
	r, ok, err := tx.Idempotency(tenant, key)
	if err != nil || !ok {
		return nil, err
	}
	if r.Fingerprint != fp {
		return nil, errIdempotencyReuse()
	}
	return r.Result, nil
}

// record stores a receipt under key; result must not be deduped.
func record(tx store.Tx, tenant, key, fp string, result any) error {
	data, err := json.Marshal(result)
	if err != nil {
		return err
	}
	return tx.PutIdempotency(tenant, key, store.Receipt{Fingerprint: fp, Result: data})
}

// fingerprint is the method-qualified idempotency fingerprint of params
// (a map in which absence and presence are already decided).
func fingerprint(method string, params map[string]any) (string, error) {
	return graph.Fingerprint(method, params)
}

// appendRecord appends one event to the current run: build is called with
// st already advanced to the new cursor, so the status it embeds carries
// the event's own cursor.
func appendRecord(tx store.Tx, tenant string, st *state, build func(st *state) protocol.WatchEvent) error {
	_, err := tx.AppendEvent(tenant, st.RunID, func(seq uint64) ([]byte, error) {
		st.Cursor = seq
		return encodeEvent(st.RunID, seq, build(st))
	})
	return err
}

// encodeEvent is the shared notification tail of one watch event: the
// members after "subscriptionId" (server.Notification.Rest). It is encoded
// once, at commit, and stored with the event.
func encodeEvent(runID string, seq uint64, ev protocol.WatchEvent) ([]byte, error) {
	body, err := protocol.Marshal(ev)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(body)+len(runID)+48)
	b = append(b, `,"runId":`...)
	b = protocol.AppendString(b, runID)
	b = append(b, `,"cursor":`...)
	b = protocol.AppendString(b, cursorString(seq))
	b = append(b, `,"event":`...)
	return append(b, body...), nil
}

func phaseEvent(st *state) protocol.WatchEvent {
	s := st.status()
	return protocol.WatchEvent{Type: protocol.EventPhase, Status: &s}
}

func bookmarkEvent(*state) protocol.WatchEvent {
	return protocol.WatchEvent{Type: protocol.EventBookmark}
}

// Initialize advertises the configured capabilities and the caller's
// cluster status.
func (b *Backend) Initialize(ctx context.Context) (*protocol.InitializeResult, error) {
	st, err := b.view(ctx, b.tenant(ctx))
	if err != nil {
		return nil, err
	}
	profiles := b.cfg.GraphProfiles
	if profiles == nil {
		profiles = []string{}
	}
	return &protocol.InitializeResult{
		ProtocolVersion: protocol.Version,
		Capabilities:    protocol.Capabilities{GraphProfiles: profiles, Logs: b.cfg.Logs, AgentAttach: b.cfg.AgentAttach},
		Status:          st.status(),
	}, nil
}

// Get reads the caller's cluster from one snapshot.
func (b *Backend) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	tenant := b.tenant(ctx)
	var (
		rec   store.Cluster
		found bool
	)
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		var err error
		rec, found, err = tx.Cluster(tenant)
		return err
	})
	if err != nil {
		return nil, b.wire(err)
	}
	res, err := b.gets.answer(tenant, rec.Data, found)
	if err != nil {
		return nil, b.wire(err)
	}
	if p.AtCursor != nil {
		if cur := res.AtCursor; cur == nil || *cur != *p.AtCursor {
			return nil, protocol.AppError(protocol.InvalidPhase, protocol.MsgCursorUnavailable, map[string]any{"currentCursor": cur})
		}
	}
	return res, nil
}

// Plan verifies a graph; it never reads or writes cluster state.
func (b *Backend) Plan(ctx context.Context, p protocol.PlanParams) (*protocol.PlanResult, error) {
	g, err := graph.Decode(p.Graph)
	if err != nil {
		return nil, protocol.SchemaError()
	}
	v, err := b.verify(ctx, g)
	if err != nil {
		return nil, err
	}
	diags, err := json.Marshal(v.Diagnostics)
	if err != nil {
		return nil, err
	}
	res := &protocol.PlanResult{OK: v.OK, Diagnostics: diags}
	if v.OK {
		if res.Bounds, err = v.Bounds.MarshalJSON(); err != nil {
			return nil, err
		}
	}
	return res, nil
}
