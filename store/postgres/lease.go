package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store"
)

// Leases expire: a lease row carries its expiry in the database's clock
// (so replicas' clocks never matter), set to now + LeaseTTL when acquired
// or renewed; a lease whose owner's session ended is free at once
// (liveness.go). Each lease operation is one statement on its own, outside
// the write transactions: it takes no sequence lock, and a write
// transaction that read the lease (CheckLease) holds it FOR SHARE, so a
// takeover waits for that transaction's commit.

const (
	qAcquireLease = `WITH prev AS (SELECT owner FROM leases WHERE name = $1)
INSERT INTO leases AS l (name, owner, epoch, expires)
VALUES ($1, $2, 1, now() + $3::float8 * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET
	epoch = CASE WHEN l.owner = excluded.owner THEN l.epoch ELSE l.epoch + 1 END,
	owner = excluded.owner,
	expires = excluded.expires
WHERE l.owner = excluded.owner OR l.owner = '' OR l.expires <= now() OR ` + ownerGone + `
RETURNING epoch, coalesce((SELECT owner FROM prev), '')`
	qLeaseHolder = `SELECT owner, epoch, greatest(0, extract(epoch FROM expires - now()) * 1e6)::bigint FROM leases WHERE name = $1`
	// qReleaseLease releases a lease and, in the same statement, tells
	// the other stores (payload $4): they drop what they remember of its
	// holder and wake their supervisors, which take the run over at once.
	// It returns a row only when the lease was released.
	qReleaseLease = `WITH r AS (UPDATE leases SET owner = '' WHERE name = $1 AND owner = $2 AND owner <> '' AND epoch = $3 RETURNING 1)
SELECT pg_notify(convert_from($5, 'UTF8'), convert_from($4, 'UTF8')) FROM r`
	qRenewLeases = `UPDATE leases SET expires = now() + $2::float8 * interval '1 microsecond' WHERE owner = $1 RETURNING name, epoch`
)

// releasedPrefix starts the payload of a lease release's notification,
// followed by the releasing store's id, a space and the lease name (a
// store of an earlier version sent the name alone); a commit's payload
// starts with a store id, which never has this prefix (hex digits only).
const releasedPrefix = "released "

// releaseOf splits a release notification's payload (after the prefix)
// into the releasing store's id ("" when an earlier version sent it) and
// the lease name.
func releaseOf(rest string) (from, name string) {
	if len(rest) > idLen && rest[idLen] == ' ' && isHexID(rest[:idLen]) {
		return rest[:idLen], rest[idLen+1:]
	}
	return "", rest
}

// idLen is the length of a store id (newID: 8 random bytes in hex).
const idLen = 16

func isHexID(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// heldLeases remembers, per lease name, until when (local monotonic
// clock) another owner holds it, so that a supervisor scanning its runs
// after every commit does not ask the database again before the lease can
// have expired.
type heldLeases struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (h *heldLeases) get(name string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	u, ok := h.until[name]
	if ok && !time.Now().Before(u) {
		delete(h.until, name)
		return time.Time{}, false
	}
	return u, ok
}

// drop forgets the holder of a lease that was released.
func (h *heldLeases) drop(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.until, name)
}

func (h *heldLeases) set(name string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil {
		h.until = map[string]time.Time{}
	}
	h.until[name] = until
}

// exec runs one statement outside a transaction, under the store's
// client-side timeout. Its error wraps store.ErrUnavailable when the
// database or the way to it failed, like a transaction's.
func (s *Store) exec(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.txTimeout)
	defer cancel()
	return classify(ctx, fn(actx))
}

// AcquireLease implements store.Leaser: owner gets the lease if it is new,
// already owner's, released, or expired; else ErrLeaseHeld.
func (s *Store) AcquireLease(ctx context.Context, name, owner string) (uint64, error) {
	if owner == "" {
		return 0, fmt.Errorf("store/postgres: lease %s: empty owner", name)
	}
	if until, ok := s.held.get(name); ok {
		return 0, fmt.Errorf("%w: %s for %v more", store.ErrLeaseHeld, name, time.Until(until).Round(time.Millisecond))
	}
	var epoch int64
	var prev string
	err := s.exec(ctx, func(ctx context.Context) error {
		if err := s.live(ctx, owner, false); err != nil {
			return err
		}
		err := s.pool.QueryRow(ctx, qAcquireLease, bytesArgs([]any{name, owner, float64(s.ttl.Microseconds())})...).Scan(&epoch, str{&prev})
		if errors.Is(err, pgx.ErrNoRows) {
			return s.leaseHeld(ctx, name)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			return 0, err
		}
		return 0, fmt.Errorf("store/postgres: acquire lease %s: %w", name, err)
	}
	if prev != "" && prev != owner {
		s.log.Info("lease taken over", "lease", name, "from", prev, "owner", owner, "epoch", epoch)
		s.observeTakeover()
	}
	return uint64(epoch), nil
}

// leaseHeld reads who holds the lease and for how long, remembers it and
// returns the ErrLeaseHeld that says so.
func (s *Store) leaseHeld(ctx context.Context, name string) error {
	var owner string
	var epoch, leftUS int64
	if err := s.pool.QueryRow(ctx, qLeaseHolder, []byte(name)).Scan(str{&owner}, &epoch, &leftUS); err != nil {
		return err
	}
	left := time.Duration(leftUS) * time.Microsecond
	s.held.set(name, time.Now().Add(left))
	return fmt.Errorf("%w: %s by %q at epoch %d for %v more", store.ErrLeaseHeld, name, owner, epoch, left.Round(time.Millisecond))
}

// ReleaseLease implements store.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error {
	return s.exec(ctx, func(ctx context.Context) error {
		payload := releasedPrefix + s.id + " " + name
		tag, err := s.pool.Exec(ctx, qReleaseLease, bytesArgs([]any{name, owner, epoch, payload, s.channel})...)
		if err != nil {
			return fmt.Errorf("store/postgres: release lease %s: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: release %s by %q at epoch %d", store.ErrLeaseLost, name, owner, epoch)
		}
		return nil
	})
}

// RenewLeases implements store.ExpiringLeaser in one statement.
func (s *Store) RenewLeases(ctx context.Context, owner string) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := s.exec(ctx, func(ctx context.Context) error {
		if err := s.live(ctx, owner, true); err != nil {
			return err
		}
		rows, err := s.pool.Query(ctx, qRenewLeases, []byte(owner), float64(s.ttl.Microseconds()))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var epoch uint64
			if err := rows.Scan(str{&name}, &epoch); err != nil {
				return err
			}
			out[name] = epoch
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("store/postgres: renew leases of %s: %w", owner, err)
	}
	return out, nil
}
