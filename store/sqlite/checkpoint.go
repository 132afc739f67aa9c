package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// WAL checkpoints run beside the writer, not on it. SQLite's own
// automatic checkpoint runs inside the commit that crossed its threshold,
// on the writer connection: the copy of the WAL into the database file and
// its two fsyncs then hold every other writer up, and they cost more as the
// database grows (its pages are further apart). The checkpointer copies
// the WAL on a connection of its own instead (a PASSIVE checkpoint, which
// never blocks the writer or a reader), about every checkpointPages pages;
// the writer's automatic checkpoint stays armed at backstopPages, so a WAL
// still grows boundedly when the checkpointer falls behind.
const (
	// checkpointPages is how many WAL pages the checkpointer lets pass
	// between checkpoints: SQLite's default automatic threshold.
	checkpointPages = 1000
	// backstopPages is the writer connection's automatic checkpoint
	// threshold (PRAGMA wal_autocheckpoint).
	backstopPages = 16 * checkpointPages
	// firstCheckpointCommits is when the first checkpoint is due, before
	// the checkpointer has seen what a commit writes: about
	// checkpointPages pages of small commits, so that a young database's
	// log grows (and reports a full disk) as it would under SQLite's own
	// threshold.
	firstCheckpointCommits = 256
	// minCommitsPerCheckpoint and maxCommitsPerCheckpoint bound the
	// commits between two checkpoints, whatever a commit writes.
	minCommitsPerCheckpoint = 4
	maxCommitsPerCheckpoint = 4096
)

// checkpointer checkpoints the WAL from its own connection when the
// writer has committed enough since the last checkpoint.
//
// The writer calls committed after each commit (under wmu); everything
// else is the checkpointer goroutine's. The commits between checkpoints
// adapt to the pages a commit writes, as measured by the WAL's growth
// between two checkpoints.
type checkpointer struct {
	db   *sql.DB
	conn *sql.Conn
	fail func(error) // reports a failed checkpoint

	commits atomic.Uint64      // commits since Open
	every   atomic.Uint64      // commits between checkpoints
	due     atomic.Uint64      // commits count at which the next one is due
	kick    chan struct{}      // 1-buffered: a checkpoint is due
	flush   chan chan struct{} // runs a due checkpoint, then closes the reply
	stop    chan struct{}
	done    sync.WaitGroup

	// Goroutine-owned.
	lastLog      int64  // WAL frames at the last checkpoint
	lastAt       uint64 // commits at the last checkpoint
	lastComplete bool   // the last checkpoint copied the whole WAL
}

// openCheckpointer opens the checkpointer's connection on path with the
// writer's synchronous setting (a checkpoint fsyncs as that setting says)
// and starts it.
func openCheckpointer(ctx context.Context, path, syncPragma string, fail func(error)) (*checkpointer, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_pragma=cache_size(-%d)", path, busyTimeoutMS, syncPragma, checkpointCacheKiB))
	if err != nil {
		return nil, fmt.Errorf("store/sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store/sqlite: open checkpointer: %w", err)
	}
	c := &checkpointer{db: db, conn: conn, fail: fail, kick: make(chan struct{}, 1), flush: make(chan chan struct{}), stop: make(chan struct{})}
	c.every.Store(firstCheckpointCommits)
	c.due.Store(firstCheckpointCommits)
	c.done.Add(1)
	go c.run()
	return c, nil
}

// checkpointCacheKiB is the checkpointer connection's page cache: it
// reads the WAL index and frames, never a B-tree.
const checkpointCacheKiB = 256

// committed counts one commit and wakes the checkpointer when a
// checkpoint is due. It never blocks.
func (c *checkpointer) committed() {
	if c.commits.Add(1) < c.due.Load() {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.done.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
			c.ifDue()
		case reply := <-c.flush:
			c.ifDue()
			close(reply)
		}
	}
}

// ifDue runs a checkpoint if one is due.
func (c *checkpointer) ifDue() {
	if n := c.commits.Load(); n >= c.due.Load() {
		c.checkpoint(n)
	}
}

// settle returns once a checkpoint due by the commits so far has run.
func (c *checkpointer) settle() {
	reply := make(chan struct{})
	select {
	case c.flush <- reply:
		<-reply
	case <-c.stop:
	}
}

// checkpoint runs one PASSIVE checkpoint at commit count n and sets when
// the next is due.
func (c *checkpointer) checkpoint(n uint64) {
	var busy, log, moved int64
	err := c.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &moved)
	if err != nil {
		c.fail(err)
		c.due.Store(n + c.every.Load())
		return
	}
	// The commits since the last checkpoint wrote the WAL's pages past
	// the last one's, or all of them when the last one copied the whole
	// WAL: the writer then starts the WAL over at its next commit. (A
	// reader still on the old WAL keeps it from starting over; the pages
	// are then counted twice and checkpoints come sooner, never later.)
	grown := log - c.lastLog
	if c.lastComplete || grown <= 0 {
		grown = log
	}
	if commits := n - c.lastAt; commits > 0 && grown > 0 {
		every := uint64(checkpointPages) * commits / uint64(grown)
		c.every.Store(min(maxCommitsPerCheckpoint, max(minCommitsPerCheckpoint, every)))
	}
	c.lastLog, c.lastAt, c.lastComplete = log, n, busy == 0 && moved == log
	c.due.Store(n + c.every.Load())
}

// close stops the goroutine and closes the connection.
func (c *checkpointer) close() error {
	close(c.stop)
	c.done.Wait()
	return errors.Join(c.conn.Close(), c.db.Close())
}
