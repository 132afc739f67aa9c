package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oecp/oecp/store"
)

// unavailableStates are the SQLSTATEs, by class (two characters) or in
// full, that say the database cannot serve requests now for a reason an
// operator fixes (as opposed to a bug or a conflict): a lost or refused
// connection (class 08), insufficient resources such as a full disk
// 53100 (class 53), a server shutting down or not yet accepting
// connections (57P01, 57P02, 57P03), a system or I/O error (class 58),
// a read-only database or role (25006), a damaged table or index
// (XX001, XX002), a database that does not exist (3D000).
var unavailableStates = map[string]bool{
	"08": true, "53": true, "58": true,
	"57P01": true, "57P02": true, "57P03": true,
	"25006": true, "XX001": true, "XX002": true, "3D000": true,
}

// unavailable reports whether err says the database or the way to it is
// unusable now: one of unavailableStates, a connection that could not be
// made, or a connection lost (a network error or an unexpected end of
// stream). A commit whose connection was lost (ErrCommitUnknown) is not:
// it may have committed, and an unavailable request has committed nothing.
func unavailable(err error) bool {
	if errors.Is(err, ErrCommitUnknown) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return len(pe.Code) == 5 && (unavailableStates[pe.Code] || unavailableStates[pe.Code[:2]])
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// classify wraps err with store.ErrUnavailable when the database failed
// for a reason of the database or the way to it (unavailable). A
// cancelled or expired ctx of the caller is never classified.
func classify(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, store.ErrUnavailable) || !unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// probeWrite rewrites the sequence row with its own value and commits:
// it fails where any write would (a read-only database or role, a full
// disk, a lost connection) and changes nothing a reader can see. It
// sends no notification and leaves the sequence the listener's fallback
// poll compares as it was.
const probeWrite = `UPDATE sequence SET last = last WHERE id = 1`

// Ping implements store.Pinger: a read in a read-only transaction, then
// a write probe (probeWrite) committed in a transaction of its own,
// begun like the store's writes (no READ WRITE that would override a
// database's or role's read-only default). Its error wraps
// store.ErrUnavailable when the database cannot serve reads or writes
// now.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.gate.Enter(); err != nil {
		return err
	}
	defer s.gate.Exit()
	err := s.probe(ctx, "read probe", pgx.TxOptions{AccessMode: pgx.ReadOnly}, readSeq)
	if err == nil {
		err = s.probe(ctx, "write probe", pgx.TxOptions{}, probeWrite)
	}
	return err
}

// probe runs sql in a transaction begun with opts and commits it. Like a
// transaction of the store, it runs again (up to maxAttempts) when its
// connection was lost, which a pooled connection cut by the server
// reports only once it is used.
func (s *Store) probe(ctx context.Context, what string, opts pgx.TxOptions, sql string) error {
	pctx, cancel := context.WithTimeout(ctx, s.txTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		var lost bool
		err := s.pool.AcquireFunc(pctx, func(c *pgxpool.Conn) error {
			err := pgx.BeginTxFunc(pctx, c.Conn(), opts, func(tx pgx.Tx) error {
				_, err := tx.Exec(pctx, sql)
				return err
			})
			lost = err != nil && c.Conn().PgConn().IsClosed()
			return err
		})
		if err == nil || !lost || attempt == maxAttempts {
			return classify(ctx, wrapErr(what, err))
		}
	}
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store/postgres: %s: %w", what, err)
}
