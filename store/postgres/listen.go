package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The listener turns other stores' commits into wake-ups. It keeps one
// connection of its own (LISTEN is per session) and loops: wait for a
// notification at most PollInterval; a notification from another store
// wakes the watchers; a quiet interval polls the schema's event sequence
// and wakes the watchers if another store moved it since the last poll (a
// sequence other than this store's own last commit), which covers a lost
// notification of an event in any way that left the connection up. A lost connection is reopened, and the
// watchers are woken once it listens again, since what was committed in
// between was never announced. Once a PollInterval, however busy the
// channel, the listener also looks for lease owners whose session ended
// (liveness.go).

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startListener connects and LISTENs before it returns, so that every
// commit after Open returns wakes this store.
func (s *Store) startListener(ctx context.Context, cc *pgx.ConnConfig) error {
	conn, err := s.listenOn(ctx, cc)
	if err != nil {
		return fmt.Errorf("store/postgres: listen: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	s.stopListen, s.listenDone = cancel, make(chan struct{})
	go s.listenLoop(lctx, cc, conn)
	return nil
}

func (s *Store) listenOn(ctx context.Context, cc *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

func (s *Store) listenLoop(ctx context.Context, cc *pgx.ConnConfig, conn *pgx.Conn) {
	defer close(s.listenDone)
	for {
		err := s.waitLoop(ctx, conn)
		_ = conn.Close(context.Background())
		s.forgetParts()
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("store/postgres: listener connection lost; reconnecting", "err", err)
		for {
			if sleepCtx(ctx, s.poll) != nil {
				return
			}
			if conn, err = s.listenOn(ctx, cc); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			s.reconnects.Log(s.log, slog.LevelWarn, "", "store/postgres: listener reconnect failed", "err", err)
		}
		s.reconnects.Reset()
		s.log.Info("store/postgres: listener reconnected")
		s.wakeForeign()
	}
}

// waitLoop waits for notifications and polls until the connection fails
// or ctx ends.
func (s *Store) waitLoop(ctx context.Context, conn *pgx.Conn) error {
	var polled uint64
	// Owners whose session ended are looked for once a PollInterval,
	// however busy the channel.
	var looked time.Time
	lookForGone := func() error {
		looked = time.Now()
		if err := s.findGone(ctx, conn); err != nil && (conn.IsClosed() || ctx.Err() != nil) {
			return err
		}
		return nil
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, s.poll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			s.notified(n.Payload)
			if time.Since(looked) >= s.poll {
				if err := lookForGone(); err != nil {
					return err
				}
			}
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed():
			return err
		}
		cur, err := s.polledSeq(ctx, conn)
		if err != nil {
			return err
		}
		if err := lookForGone(); err != nil {
			return err
		}
		// A sequence this store committed itself was announced by its own
		// commit; any other one moved by another store.
		if polled != 0 && cur != polled && cur != s.ownSeq.Load() {
			s.wakeForeign()
		}
		polled = cur
	}
}

// polledSeq reads the schema's last event sequence, bounded by the
// statement timeout on the client side too (a connection that stopped
// answering counts as lost).
func (s *Store) polledSeq(ctx context.Context, conn *pgx.Conn) (uint64, error) {
	qctx, cancel := context.WithTimeout(ctx, s.txTimeout)
	defer cancel()
	var seq int64
	err := conn.QueryRow(qctx, readSeq).Scan(&seq)
	return uint64(seq), err
}

// notified handles one notification on the store's channel: another
// store's live-output message is received, a lease another store released
// is forgotten and wakes the watchers (its run can be taken over at once),
// and another store's commit wakes them. What this store sent itself
// changes nothing here.
func (s *Store) notified(payload string) {
	self := s.id + " "
	if live, ok := strings.CutPrefix(payload, livePrefix); ok {
		if !strings.HasPrefix(live, self) {
			s.received(live)
		}
		return
	}
	if rest, ok := strings.CutPrefix(payload, releasedPrefix); ok {
		if from, name := releaseOf(rest); from != s.id {
			s.held.drop(name)
			s.wakeForeign()
		}
		return
	}
	if !strings.HasPrefix(payload, self) {
		s.wakeForeign()
	}
}
