package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
)

// WAL checkpoints run beside the writer, not on it. SQLite's own
// automatic checkpoint runs inside the commit that crossed its threshold,
// on the writer connection: the copy of the WAL into the database file and
// its two fsyncs then hold every other writer up, and they cost more as the
// database grows (its pages are further apart). The checkpointer copies
// the WAL on a connection of its own instead (a PASSIVE checkpoint, which
// never blocks the writer or a reader) each time checkpointPages more
// pages are in the log, the threshold SQLite itself uses; the writer's
// automatic checkpoint stays armed at backstopPages, so a WAL still grows
// boundedly when the checkpointer falls behind.
const (
	// checkpointPages is how many WAL pages the checkpointer lets pass
	// between checkpoints: SQLite's default automatic threshold.
	checkpointPages = 1000
	// backstopPages is the writer connection's automatic checkpoint
	// threshold (PRAGMA wal_autocheckpoint).
	backstopPages = 16 * checkpointPages
	// fallbackCommits is how many commits pass between checkpoints when
	// the WAL index cannot be read.
	fallbackCommits = 64
)

// walCheckpointer checkpoints the WAL from its own connection when
// checkpointPages pages were added to the log since the last checkpoint.
// It learns the log's length from the WAL index (the "-shm" file, which
// every connection maps): a header of 48 bytes, written twice, whose
// mxFrame (offset 16, native byte order) is the number of frames in the
// log; a reader that finds the two copies different retries later, as
// SQLite's own readers do.
//
// The writer calls committed after each commit; everything else is the
// checkpointer goroutine's.
type walCheckpointer struct {
	db   *sql.DB
	conn *sql.Conn
	shm  *os.File    // the WAL index; nil: count commits instead
	fail func(error) // reports a failed checkpoint

	kick  chan struct{}      // 1-buffered: something was committed
	flush chan chan struct{} // runs a due checkpoint, then closes the reply
	stop  chan struct{}
	done  sync.WaitGroup

	// Goroutine-owned.
	last    uint32 // the log's frames when it was last checkpointed
	commits int    // commits since the last checkpoint (shm nil)
}

// openWALCheckpointer opens the checkpointer's connection on path with the
// writer's synchronous setting (a checkpoint fsyncs as that setting says)
// and starts it. noIndex is told why the WAL index cannot be read, if it
// cannot.
func openWALCheckpointer(ctx context.Context, path, syncPragma string, fail, noIndex func(error)) (*walCheckpointer, error) {
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
	c := &walCheckpointer{db: db, conn: conn, fail: fail, kick: make(chan struct{}, 1), flush: make(chan chan struct{}), stop: make(chan struct{})}
	if c.shm, err = os.Open(path + "-shm"); err == nil {
		if _, err = c.frames(); err != nil {
			_ = c.shm.Close()
			c.shm = nil
		}
	}
	if err != nil {
		noIndex(err)
	}
	c.done.Add(1)
	go c.run()
	return c, nil
}

// checkpointCacheKiB is the checkpointer connection's page cache: it
// reads the WAL index and frames, never a B-tree.
const checkpointCacheKiB = 256

// walIndexVersion is the WAL index format this reading understands
// (WalIndexHdr.iVersion).
const walIndexVersion = 3007000

// errIndexChanging: the two copies of the WAL index header differ (the
// writer is updating it).
var errIndexChanging = errors.New("WAL index header being written")

// frames reads the number of frames in the log from the WAL index.
func (c *walCheckpointer) frames() (uint32, error) {
	var hdr [96]byte
	if _, err := c.shm.ReadAt(hdr[:], 0); err != nil {
		return 0, fmt.Errorf("read WAL index: %w", err)
	}
	if !bytes.Equal(hdr[:48], hdr[48:]) {
		return 0, errIndexChanging
	}
	if v := binary.NativeEndian.Uint32(hdr[0:]); v != walIndexVersion {
		return 0, fmt.Errorf("WAL index version %d, want %d", v, walIndexVersion)
	}
	return binary.NativeEndian.Uint32(hdr[16:]), nil
}

// committed wakes the checkpointer after a commit. It never blocks.
func (c *walCheckpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *walCheckpointer) run() {
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

// ifDue runs a checkpoint if checkpointPages pages were logged since the
// last one (fallbackCommits commits, without the WAL index).
func (c *walCheckpointer) ifDue() {
	if c.shm == nil {
		if c.commits++; c.commits >= fallbackCommits {
			c.commits = 0
			c.checkpoint(0)
		}
		return
	}
	n, err := c.frames()
	if err != nil {
		return // being written: the next commit looks again
	}
	if n < c.last {
		c.last = 0 // the writer started the log over
	}
	if n-c.last >= checkpointPages {
		c.checkpoint(n)
	}
}

// settle returns once a checkpoint due by the commits so far has run.
func (c *walCheckpointer) settle() {
	reply := make(chan struct{})
	select {
	case c.flush <- reply:
		<-reply
	case <-c.stop:
	}
}

// checkpoint runs one PASSIVE checkpoint with the log at frames pages.
// The next one is due when checkpointPages more pages are in the log,
// whether or not readers on older snapshots kept this one from copying
// them all, or it failed (a full disk is not tried again, and logged, at
// every commit).
func (c *walCheckpointer) checkpoint(frames uint32) {
	var busy, log, moved int64
	err := c.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &moved)
	if err != nil {
		c.last = frames
		c.fail(err)
		return
	}
	if log > 0 {
		c.last = uint32(log)
	}
}

// close stops the goroutine and closes the connection.
func (c *walCheckpointer) close() error {
	close(c.stop)
	c.done.Wait()
	errs := []error{c.conn.Close(), c.db.Close()}
	if c.shm != nil {
		errs = append(errs, c.shm.Close())
	}
	return errors.Join(errs...)
}
