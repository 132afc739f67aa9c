// Package store is the store port of the backends (the v1 clusters and
// native runs): a small, storage-neutral, transactional interface over
// per-tenant records, idempotency receipts, run records (with tombstones),
// an append-only event log keyed by one global sequence, runs' checkpoint
// bundles, named counters and indexes (sets of entries with a number each,
// read by entry, whole or below a number), with supervision leases that
// fence a run's supervisor (Leaser, LeaseReader), deletion (Pruner), agent
// evidence (Evidence), a health check (Pinger) and an observer
// (Observable), and the helpers built on it (claims, retention). What only
// some stores can do are optional ports, found by type assertion: leases
// acquired inside a write transaction (TxLeaser, SQLite), leases that
// expire (ExpiringLeaser) and messages between replicas (Shared,
// Broadcaster, ForeignWakes), all three of a store several processes share
// (PostgreSQL). The backends run every check that guards a write
// (idempotency replay, generation and run compare-and-set, phase rules, the
// lease fence) inside one Update transaction, so the same logic holds on
// any implementation that gives Update serializable semantics: the
// in-memory store here (NewMemory), the SQLite store of package
// store/sqlite and the PostgreSQL store of package store/postgres.
//
// The event sequence is the watch cursor. Watchers never receive events
// from the store directly: they are woken after a commit (Changed) and
// re-read from their own position, so a missed wake-up costs latency, never
// an event.
//
// storetest holds the conformance suite every implementation must pass.
package store

import (
	"context"
	"errors"
)

// Sentinel errors. Implementations wrap them with context; callers branch
// with errors.Is.
var (
	// ErrVersionConflict: PutCluster was given a version other than the
	// stored version + 1 (a concurrent writer committed first).
	ErrVersionConflict = errors.New("store: cluster record version conflict")
	// ErrExists: the idempotency key or run id is already recorded.
	ErrExists = errors.New("store: record already exists")
	// ErrNoRun: an event was appended to (or a tombstone set on) a run
	// that was never created.
	ErrNoRun = errors.New("store: unknown run")
	// ErrTombstoned: an event was appended to a tombstoned run.
	ErrTombstoned = errors.New("store: run is tombstoned")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrReadOnly: a write was attempted through a read-only view.
	ErrReadOnly = errors.New("store: read-only transaction")
	// ErrUnavailable: the storage underneath cannot serve the request
	// (a full disk, a read-only or damaged database, an I/O error). It is
	// an operational condition, not a bug: the same request may succeed
	// once an operator fixes the storage.
	ErrUnavailable = errors.New("store: unavailable")
)

// Pinger is the health check of a Store.
type Pinger interface {
	// Ping returns nil when the store can read and commit a write now,
	// else an error that wraps ErrUnavailable (or ErrClosed). It changes
	// nothing a reader can see and wakes no watcher.
	Ping(ctx context.Context) error
}

// Store is the transactional store, with its leases (lease.go), runs'
// agent evidence (evidence.go), health check and observer (observe.go).
type Store interface {
	Leaser
	Evidence
	Pinger
	Observable

	// Update runs fn in one serializable read-write transaction. If fn
	// returns an error nothing it wrote is kept (counters and sequences
	// included) and Update returns that error unchanged. After a commit
	// that wrote anything, every channel obtained from Changed before the
	// commit is closed. fn may be run more than once (implementations may
	// retry on serialization failures), so it must have no effects outside
	// the transaction.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn against one consistent read-only snapshot.
	View(ctx context.Context, fn func(ReadTx) error) error
	// Changed returns a channel that is closed after the next commit. Take
	// it before reading, then wait on it when the read found nothing new.
	Changed() <-chan struct{}
	// Close releases the store; later calls fail with ErrClosed.
	Close() error
}

// ReadTx is the read side of a transaction. All lookups are scoped by
// tenant: a record of one tenant is never visible under another.
type ReadTx interface {
	LeaseReader
	// Cluster returns the tenant's cluster record.
	Cluster(tenant string) (Cluster, bool, error)
	// Idempotency returns the receipt recorded under key.
	Idempotency(tenant, key string) (Receipt, bool, error)
	// Run returns a run record (tombstoned runs included).
	Run(tenant, runID string) (Run, bool, error)
	// FirstRunAfter returns the tenant's run with the smallest FirstSeq
	// greater than seq: the run a parked watcher attaches to.
	FirstRunAfter(tenant string, seq uint64) (Run, bool, error)
	// Event returns the event with sequence seq, if it belongs to tenant
	// and its run is not tombstoned.
	Event(tenant string, seq uint64) (Event, bool, error)
	// Events returns up to limit events of one run with Seq > afterSeq, in
	// sequence order (none for a tombstoned run).
	Events(tenant, runID string, afterSeq uint64, limit int) ([]Event, error)
	// LastSeq is the highest sequence ever assigned (0 when none).
	LastSeq() (uint64, error)
	// Checkpoint returns the run's checkpoint bundle, the one the last
	// PutCheckpoint of the run kept. The bytes must be treated as
	// immutable.
	Checkpoint(tenant, runID string) ([]byte, bool, error)
	// RunState returns the run's state record, the one the last
	// PutRunState of the run kept (ok false: the run has none, or no
	// record). The bytes must be treated as immutable.
	RunState(tenant, runID string) (r Record, ok bool, err error)
	// IndexEntry returns entry's number in the index named key; ok is
	// false when the entry is not in it.
	IndexEntry(key, entry string) (n uint64, ok bool, err error)
	// IndexEntries returns every entry of the index named key, ordered by
	// number, then by entry (byte order), smallest first.
	IndexEntries(key string) ([]Indexed, error)
	// IndexBelow returns, in IndexEntries' order, up to limit entries of
	// the index named key whose number is below below.
	IndexBelow(key string, below uint64, limit int) ([]Indexed, error)
}

// Tx is a read-write transaction, deletions (prune.go) included.
type Tx interface {
	ReadTx
	Pruner
	// PutCluster stores the tenant's cluster record. c.Version must be the
	// stored version + 1 (1 for a new record), else ErrVersionConflict.
	PutCluster(tenant string, c Cluster) error
	// PutIdempotency records a receipt; an existing key is ErrExists.
	PutIdempotency(tenant, key string, r Receipt) error
	// CreateRun records a new run (FirstSeq, LastSeq, Count are ignored and
	// start at zero); an existing id is ErrExists.
	CreateRun(tenant string, r Run) error
	// AppendEvent assigns the next global sequence, calls encode with it to
	// obtain the event body, and appends the event to the run. encode's
	// error aborts the append (and is returned).
	AppendEvent(tenant, runID string, encode func(seq uint64) ([]byte, error)) (Event, error)
	// TombstoneRun marks a run deleted and drops its events; its record
	// keeps LastSeq so that callers can say when it was tombstoned.
	TombstoneRun(tenant, runID string) error
	// NextCounter increments the named global counter and returns the new
	// value (the first call returns 1).
	NextCounter(name string) (uint64, error)
	// PutCheckpoint keeps bundle (opaque bytes, up to tens of MiB) as the
	// run's checkpoint, replacing the one before. The run record must
	// exist (tombstoned or not), else ErrNoRun and nothing is written; a
	// run has at most one checkpoint, and Pruner.DeleteRun deletes it with
	// the run.
	PutCheckpoint(tenant, runID string, bundle []byte) error
	// PutRunState keeps r as the run's state record. r.Version must be
	// the kept version + 1 (1 for the run's first), else
	// ErrVersionConflict; the run record must exist (tombstoned or not),
	// else ErrNoRun. Nothing is written on an error. Pruner.DeleteRun
	// deletes the state with the run.
	PutRunState(tenant, runID string, r Record) error
	// SetIndexEntry sets entry's number in the index named key (adding
	// the entry, or replacing its number) or, with n == 0, removes the
	// entry (nothing when it is absent). n must be at most MaxIndexNumber,
	// else the error wraps ErrIndexNumber.
	SetIndexEntry(key, entry string, n uint64) error
}

// Cluster is one tenant's cluster state: an opaque blob owned by the
// cluster package, versioned for optimistic concurrency.
type Cluster struct {
	Version uint64
	Data    []byte
}

// Record is a run's state: an opaque blob owned by the runs package,
// versioned for optimistic concurrency as Cluster is.
type Record struct {
	Version uint64
	Data    []byte
}

// Receipt is an idempotency record: the operation's fingerprint and its
// encoded original result.
type Receipt struct {
	Fingerprint string
	Result      []byte
}

// Run is a run record. FirstSeq, LastSeq and Count are maintained by the
// store as events are appended.
type Run struct {
	ID string
	// Seed is the run's verified root input (opaque JSON).
	Seed       []byte
	FirstSeq   uint64
	LastSeq    uint64
	Count      uint64
	Tombstoned bool
}

// Event is one appended event. Body is written once at append time and
// shared by every reader; it must be treated as immutable.
type Event struct {
	Seq   uint64
	RunID string
	// Index is the 1-based position of the event within its run.
	Index uint64
	Body  []byte
}

// Shared is implemented by a store that other processes write as well
// (several replicas on one database). A reader that is woken only by its
// own process's writes must then also wait on Changed, which reports every
// process's commits.
type Shared interface {
	SharedByReplicas() bool
}

// IsShared reports whether st is written by other processes too.
func IsShared(st Store) bool {
	s, ok := st.(Shared)
	return ok && s.SharedByReplicas()
}
