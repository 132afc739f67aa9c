// Package postgres is the shared store: the store port (store.Store and
// store.ExpiringLeaser) on a PostgreSQL database, so that several
// `oecp serve` replicas keep one ledger. Everything durable is in the
// database; a replica keeps only a connection pool, one listening
// connection, one connection per lease owner holding the owner's
// liveness lock (liveness.go) and a cache of leases it saw held by
// others.
//
// Tables live in one schema (Options.Schema, default "oecp"), created and
// migrated at Open: the schema records its version, migrations run in one
// transaction under an advisory lock (replicas starting at once migrate
// once), and a schema written by a newer binary is refused
// (ErrSchemaTooNew).
//
// Write transactions (Update) run at READ COMMITTED and lock the one
// sequence row in their first statement, holding it to their commit. So
// write transactions are serialized: each statement after the lock sees
// every earlier writer's commit, and the checks the cluster package runs
// inside Update (idempotency replay, compare-and-set, phase, lease fence)
// see the data they guard and nothing can change it before the commit.
// The same lock makes the event sequence (the watch cursor) follow commit
// order: a transaction reads the sequence only after the previous holder
// committed, and PostgreSQL makes a commit visible before it releases the
// committing transaction's locks. A snapshot that sees sequence n
// therefore sees every sequence below n, and a watcher reading "after my
// cursor" can never pass an event that becomes visible later.
//
// A write transaction's writes are queued and sent, pipelined, with its
// next read or with its COMMIT, so the lock is held for few round trips.
// Transactions are retried on serialization failures, deadlocks and a
// connection lost before the commit was sent; a connection lost after it
// was sent is reported as ErrCommitUnknown (the commit may or may not
// have happened). Every statement runs under a statement timeout, and the
// server ends a transaction left idle as long (a replica that stops while
// it holds the sequence lock cannot stall the others).
//
// Reads (View) run in one REPEATABLE READ READ ONLY transaction: one
// snapshot, no locks.
//
// Wake-ups: every commit that wrote anything sends NOTIFY on the store's
// channel (payload: the sending store's id and the last sequence), and
// each store LISTENs on one dedicated connection. A notification from
// another store closes the Changed channel; a local commit closes it at
// once. A watcher always re-reads from its own cursor, so a missed
// notification costs latency, never an event: after reconnecting the
// listener wakes everyone, and it polls every Options.PollInterval,
// waking everyone when the database's transaction snapshot moved.
//
// Backups are the database's own: pg_dump of the schema, or a base backup
// with WAL archiving for point-in-time recovery.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oecp/oecp/internal/lograte"
	"github.com/oecp/oecp/store"
)

// Defaults of Options.
const (
	DefaultSchema           = "oecp"
	DefaultMaxConns         = 10
	DefaultStatementTimeout = 30 * time.Second
	DefaultLeaseTTL         = 15 * time.Second
	DefaultPollInterval     = time.Second
)

// maxAttempts bounds the runs of one transaction that keeps meeting
// serialization failures or lost connections.
const maxAttempts = 8

// ErrCommitUnknown: the connection was lost after COMMIT was sent, so the
// transaction may or may not have committed. Idempotency keys make the
// client's retry safe.
var ErrCommitUnknown = errors.New("store/postgres: connection lost during commit; outcome unknown")

// Options configures Open.
type Options struct {
	// DSN is the database URL or key=value string (libpq syntax).
	DSN string
	// Schema holds the tables. Empty: the DSN's search_path if it names
	// one schema, else DefaultSchema.
	Schema string
	// MaxConns bounds the connection pool (0: DefaultMaxConns). The
	// listener uses one more connection.
	MaxConns int32
	// StatementTimeout bounds every statement and every idle span inside
	// a transaction (0: DefaultStatementTimeout).
	StatementTimeout time.Duration
	// LeaseTTL is how long a lease lasts unless renewed (0:
	// DefaultLeaseTTL).
	LeaseTTL time.Duration
	// PollInterval is the listener's fallback poll (0:
	// DefaultPollInterval).
	PollInterval time.Duration
	// Log receives open, migration, listener and lease messages; nil
	// discards.
	Log *slog.Logger
}

// Store is the PostgreSQL store. It implements store.Store,
// store.ExpiringLeaser and store.Pinger. An error of a database that
// cannot serve requests now (unavailable: a lost or refused connection
// after the retries, a full disk, a read-only database, a shutdown)
// wraps store.ErrUnavailable.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	channel string
	id      string // this store's id in notification payloads
	log     *slog.Logger
	obs     store.Observer // nil: nothing is reported (SetObserver)
	ttl     time.Duration
	poll    time.Duration
	// txTimeout bounds one attempt of a transaction on the client side.
	txTimeout time.Duration

	gate   store.Gate   // Close waits for the transactions in flight
	signal store.Signal // Changed
	// foreign counts the wake-ups for other stores' commits, which also
	// wake foreignSignal (wakeForeign).
	foreign       atomic.Uint64
	foreignSignal store.Signal
	// ownSeq is the last event sequence this store committed.
	ownSeq atomic.Uint64

	stopListen context.CancelFunc
	listenDone chan struct{}

	held heldLeases
	bc   broadcaster
	// reconnects bounds the repeats of the listener's failed reconnects
	// (one a PollInterval while the database is down).
	reconnects lograte.Limiter
	// alive holds the liveness locks of the store's lease owners
	// (liveness.go).
	alive liveness
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.ExpiringLeaser = (*Store)(nil)
	_ store.Pinger         = (*Store)(nil)
)

// Open connects, creates or migrates the schema, and starts the listener.
func Open(ctx context.Context, opt Options) (*Store, error) {
	cfg, schema, err := poolConfig(opt)
	if err != nil {
		return nil, err
	}
	logger := opt.Log
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := migrateOnce(ctx, cfg.ConnConfig, schema, logger); err != nil {
		return nil, classify(ctx, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, classify(ctx, fmt.Errorf("store/postgres: %w", err))
	}
	s := &Store{
		pool: pool, schema: schema, channel: channelOf(schema), id: newID(), log: logger,
		ttl: orDefault(opt.LeaseTTL, DefaultLeaseTTL), poll: orDefault(opt.PollInterval, DefaultPollInterval),
		txTimeout: 2 * orDefault(opt.StatementTimeout, DefaultStatementTimeout),
	}
	s.alive.cc = cfg.ConnConfig.Copy()
	if err := s.startListener(ctx, cfg.ConnConfig.Copy()); err != nil {
		pool.Close()
		return nil, classify(ctx, err)
	}
	logger.Info("ledger open", "store", "postgres", "host", cfg.ConnConfig.Host, "database", cfg.ConnConfig.Database,
		"schema", schema, "schema_version", SchemaVersion, "pool", cfg.MaxConns, "lease_ttl", s.ttl)
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// poolConfig parses the DSN and applies the options: the schema as the
// search path, the statement and idle-in-transaction timeouts, the pool
// size.
func poolConfig(opt Options) (*pgxpool.Config, string, error) {
	cfg, err := pgxpool.ParseConfig(opt.DSN)
	if err != nil {
		return nil, "", fmt.Errorf("store/postgres: DSN: %w", err)
	}
	schema := opt.Schema
	if schema == "" {
		schema = schemaFromSearchPath(cfg.ConnConfig.RuntimeParams["search_path"])
	}
	params := cfg.ConnConfig.RuntimeParams
	timeout := orDefault(opt.StatementTimeout, DefaultStatementTimeout)
	params["search_path"] = pgx.Identifier{schema}.Sanitize()
	params["statement_timeout"] = fmt.Sprint(timeout.Milliseconds())
	params["idle_in_transaction_session_timeout"] = fmt.Sprint(timeout.Milliseconds())
	if params["application_name"] == "" {
		params["application_name"] = "oecp"
	}
	cfg.MaxConns = opt.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	return cfg, schema, nil
}

// schemaFromSearchPath is the one schema a search_path names, or
// DefaultSchema when it names none or several.
func schemaFromSearchPath(p string) string {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == ',' || c == ' ' || c == '"' || c == '$' {
			return DefaultSchema
		}
	}
	if p == "" {
		return DefaultSchema
	}
	return p
}

// channelOf is the NOTIFY channel of a schema (at most 63 bytes, the
// server's identifier limit).
func channelOf(schema string) string {
	c := "oecp." + schema
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// migrateOnce migrates the schema on a connection of its own.
func migrateOnce(ctx context.Context, cc *pgx.ConnConfig, schema string, log *slog.Logger) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("store/postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	from, err := migrate(ctx, conn, schema, SchemaVersion)
	if err != nil {
		return fmt.Errorf("store/postgres: %w", err)
	}
	if from < SchemaVersion {
		log.Info("ledger schema migrated", "schema", schema, "from", from, "to", SchemaVersion)
	}
	return nil
}

// Schema is the schema that holds the tables.
func (s *Store) Schema() string { return s.schema }

// LeaseTTL implements store.ExpiringLeaser.
func (s *Store) LeaseTTL() time.Duration { return s.ttl }

// Close waits for transactions in flight, stops the listener and closes
// the pool.
func (s *Store) Close() error {
	if err := s.gate.Close(); err != nil {
		return err
	}
	s.stopBroadcasts()
	s.stopListen()
	<-s.listenDone
	s.closeLiveness()
	s.pool.Close()
	// Wake the watchers: their next read fails with ErrClosed instead of
	// waiting for a commit that will never come.
	s.signal.Wake()
	s.foreignSignal.Wake()
	return nil
}

// Changed returns a channel closed after the next commit, of this store
// or of another store on the same schema.
func (s *Store) Changed() <-chan struct{} { return s.signal.Changed() }

// Update runs fn in one write transaction (see the package documentation),
// retrying it on serialization failures and lost connections, and wakes
// the watchers once a transaction that wrote commits. ctx is checked
// before it starts; a started attempt is bounded by the statement
// timeout, not by ctx.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, true, func(t *txn) error { return fn(t) })
}

// View runs fn against one consistent snapshot.
func (s *Store) View(ctx context.Context, fn func(store.ReadTx) error) error {
	return s.run(ctx, false, func(t *txn) error { return fn(t) })
}

// run runs fn in a transaction, again while an attempt fails in a way
// that is safe to retry.
func (s *Store) run(ctx context.Context, write bool, fn func(*txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	for attempt := 1; ; attempt++ {
		err, retry := s.attempt(ctx, write, fn)
		if !retry || attempt == maxAttempts {
			return classify(ctx, err)
		}
		s.log.Debug("store/postgres: transaction retried", "attempt", attempt, "err", err)
		if err := sleepCtx(ctx, time.Duration(attempt)*time.Millisecond); err != nil {
			return err
		}
	}
}

// attempt runs fn once in a transaction of its own and says whether a
// failure may be retried.
func (s *Store) attempt(ctx context.Context, write bool, fn func(*txn) error) (err error, retry bool) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.txTimeout)
	defer cancel()
	pc, err := s.pool.Acquire(actx)
	if err != nil {
		return fmt.Errorf("store/postgres: acquire connection: %w", err), true
	}
	t := &txn{s: s, ctx: actx, conn: pc.Conn(), write: write}
	defer t.release(pc)
	start := time.Now()
	ferr := fn(t)
	switch {
	case t.err != nil:
		if write {
			store.ReportCommit(s.obs, start, true)
		}
		if ferr == nil || t.retry {
			ferr = t.err
		}
		return ferr, t.retry
	case ferr != nil:
		return ferr, false
	case write && t.dirty:
		err := t.commit()
		store.ReportCommit(s.obs, start, err != nil)
		if err != nil {
			return err, t.retry
		}
		s.signal.Wake()
	}
	return nil, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SharedByReplicas reports true: every replica writes the same database,
// so readers must wait on Changed, not only on their own process's writes.
func (s *Store) SharedByReplicas() bool { return true }
