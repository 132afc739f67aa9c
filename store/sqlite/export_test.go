package sqlite

import (
	"context"
	"slices"
	"strings"
)

// OpenAtVersion opens a store whose schema is migrated to version v only,
// to build old-version databases for the migration tests. Only Close may be
// called on the result when v < SchemaVersion.
func OpenAtVersion(ctx context.Context, opt Options, v int) (*Store, error) {
	return open(ctx, opt, v)
}

// SettleCheckpoints returns once the checkpoint the commits so far made
// due has run.
func SettleCheckpoints(s *Store) { s.ckpt.settle() }

// CheckpointPages is how many WAL pages pass between checkpoints.
const CheckpointPages = checkpointPages

// ReadsWALIndex reports whether the checkpointer follows the log's length
// in the WAL index (rather than counting commits).
func ReadsWALIndex(s *Store) bool { return s.ckpt.shm != nil }

// CheckpointsVersion is the schema version that made the checkpoints
// table.
var CheckpointsVersion = slices.IndexFunc(migrations, func(m string) bool {
	return strings.Contains(m, "CREATE TABLE checkpoints")
}) + 1

// WriterMapBytes is how much of the database file the writer maps.
const WriterMapBytes = writerMapBytes

// WriterMapSize is the writer connection's PRAGMA mmap_size.
func WriterMapSize(s *Store) (n int64, err error) {
	_ = s.writer.run(context.Background(), func() {
		err = s.wconn.QueryRowContext(context.Background(), "PRAGMA mmap_size").Scan(&n)
	})
	return n, err
}
