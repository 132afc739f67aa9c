package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
)

// A dead replica is noticed from what PostgreSQL knows. Each lease owner
// of a store holds a session-level advisory lock (livenessSpace, its key)
// on a connection of its own for as long as it lives, and records the key
// in the replicas table with the time it took the lock. The server drops
// the lock when that session ends: at once when the replica's process
// dies (its kernel closes the socket), later when the network to it is
// cut (when the server gives up on the connection). A lease whose owner
// recorded a lock that is no longer held is free at once: AcquireLease
// takes it over (bumping the epoch, which fences the old owner like an
// expiry), and each store's listener looks for such owners at every poll
// (PollInterval) and wakes its supervisor, so the survivors take a dead
// replica's runs over in about a second instead of a lease TTL.
//
// Only a lock taken since the database server started counts: after a
// database restart every session, and every lock, is gone, and a live
// replica's lease must not look free until it has taken its lock again
// (at its next renewal); until then its leases expire as before. A
// replica that is stopped (SIGSTOP) or merely slow keeps its session, so
// it keeps its leases until they expire, and its writes stay fenced by
// their epochs. Owners that never recorded a lock (an older oecp) are
// judged by expiry alone.
//
// Session-level advisory locks need a session of their own: through a
// pooler in transaction mode (PgBouncer's default) the lock would be
// released under the owner, so point --dsn at the database or at a pooler
// in session mode.

// livenessSpace is the first key of every liveness lock ("oecp"), so
// that they never collide with another application's two-key advisory
// locks that do not use it.
const livenessSpace int32 = 0x6f656370

// livenessTries bounds the keys tried for one owner when another
// session holds the first (two owners whose keys collide).
const livenessTries = 8

// ownerGone is true, for the lease row aliased l, when its owner recorded
// a liveness lock since the database server started and nobody holds that
// lock now: the owner's session ended.
const ownerGone = `EXISTS (SELECT 1 FROM replicas r WHERE r.owner = l.owner AND r.locked_since > pg_postmaster_start_time()
	AND NOT EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory'
		AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND k.classid = 1868915568::oid AND k.objid = r.key::oid AND k.objsubid = 2 AND k.granted))`

const (
	qTryLiveness  = `SELECT pg_try_advisory_lock($1::int, $2::int)`
	qRegisterLive = `INSERT INTO replicas (owner, key, locked_since) VALUES ($1, $2, now())
ON CONFLICT (owner) DO UPDATE SET key = excluded.key, locked_since = excluded.locked_since`
	qUnregister = `DELETE FROM replicas WHERE owner = $1`
	// qGoneOwners lists the owners whose session ended while they still
	// hold unexpired leases, with those leases.
	qGoneOwners = `SELECT l.owner, l.name FROM leases l WHERE l.owner > ''::bytea AND l.expires > now() AND ` + ownerGone
	// qForgetGone deletes the records of owners whose lock is gone and
	// who hold no lease any more (their leases were taken over or
	// released).
	qForgetGone = `DELETE FROM replicas r WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.owner = r.owner AND l.owner > ''::bytea)
	AND NOT EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory'
		AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND k.classid = 1868915568::oid AND k.objid = r.key::oid AND k.objsubid = 2 AND k.granted)`
)

func init() {
	// The SQL above spells livenessSpace as a literal.
	if strconv.Itoa(int(livenessSpace)) != "1868915568" {
		panic("store/postgres: livenessSpace and its SQL literal differ")
	}
}

// liveness holds the liveness lock of each owner of this store, each on
// a connection of its own.
type liveness struct {
	mu    sync.Mutex
	cc    *pgx.ConnConfig
	conns map[string]*pgx.Conn
	// gone are the owners found gone and reported, so that each is
	// logged once.
	gone map[string]bool
}

// livenessKey is the lock key of owner at try i.
func livenessKey(owner string, i int) int32 {
	h := fnv.New32a()
	h.Write([]byte(owner))
	if i > 0 {
		h.Write([]byte("#" + strconv.Itoa(i)))
	}
	return int32(h.Sum32())
}

// live makes sure owner holds its liveness lock, on a connection that
// answered (ping: it is asked now). It is called before every lease
// acquisition (without ping) and renewal (with ping), so an owner whose
// session was lost takes its lock again at its next renewal.
func (s *Store) live(ctx context.Context, owner string, ping bool) error {
	l := &s.alive
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.conns[owner]; c != nil {
		if !c.IsClosed() && (!ping || c.Ping(ctx) == nil) {
			return nil
		}
		_ = c.Close(ctx)
		delete(l.conns, owner)
	}
	conn, err := pgx.ConnectConfig(ctx, l.cc)
	if err != nil {
		return fmt.Errorf("store/postgres: liveness connection: %w", err)
	}
	key, err := lockLiveness(ctx, conn, owner)
	if err == nil {
		_, err = conn.Exec(ctx, qRegisterLive, []byte(owner), key)
	}
	if err != nil {
		_ = conn.Close(ctx)
		return fmt.Errorf("store/postgres: liveness lock of %s: %w", owner, err)
	}
	if l.conns == nil {
		l.conns = map[string]*pgx.Conn{}
	}
	l.conns[owner] = conn
	return nil
}

// lockLiveness takes the first free liveness lock of owner on conn and
// returns its key.
func lockLiveness(ctx context.Context, conn *pgx.Conn, owner string) (int32, error) {
	for i := range livenessTries {
		key := livenessKey(owner, i)
		var got bool
		if err := conn.QueryRow(ctx, qTryLiveness, livenessSpace, key).Scan(&got); err != nil {
			return 0, err
		}
		if got {
			return key, nil
		}
	}
	return 0, fmt.Errorf("no free liveness lock after %d keys", livenessTries)
}

// closeLiveness gives up every liveness lock (the store closes): each
// owner's record goes, then its session.
func (s *Store) closeLiveness() {
	l := &s.alive
	l.mu.Lock()
	defer l.mu.Unlock()
	for owner, c := range l.conns {
		ctx, cancel := context.WithTimeout(context.Background(), s.txTimeout)
		if !c.IsClosed() {
			_, _ = c.Exec(ctx, qUnregister, []byte(owner))
		}
		_ = c.Close(ctx)
		cancel()
	}
	clear(l.conns)
}

// findGone looks, on the listener's connection, for owners whose session
// ended while they hold leases: their leases are forgotten from the
// cache of leases held elsewhere and the supervisors are woken, so that
// a pass takes the leases over now. Records of gone owners that hold no
// lease any more are deleted.
func (s *Store) findGone(ctx context.Context, conn *pgx.Conn) error {
	qctx, cancel := context.WithTimeout(ctx, s.txTimeout)
	defer cancel()
	rows, err := conn.Query(qctx, qGoneOwners)
	if err != nil {
		return err
	}
	gone := map[string][]string{}
	for rows.Next() {
		var owner, name string
		if err := rows.Scan(str{&owner}, str{&name}); err != nil {
			rows.Close()
			return err
		}
		gone[owner] = append(gone[owner], name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(gone) > 0 {
		s.alive.mu.Lock()
		if s.alive.gone == nil {
			s.alive.gone = map[string]bool{}
		}
		for owner, names := range gone {
			if !s.alive.gone[owner] {
				s.alive.gone[owner] = true
				s.log.Info("store/postgres: a lease owner's session ended; its leases are free", "owner", owner, "leases", len(names))
			}
			for _, name := range names {
				s.held.drop(name)
			}
		}
		s.alive.mu.Unlock()
		s.wakeForeign()
		return nil
	}
	s.alive.mu.Lock()
	clear(s.alive.gone)
	s.alive.mu.Unlock()
	_, err = conn.Exec(qctx, qForgetGone)
	return err
}
