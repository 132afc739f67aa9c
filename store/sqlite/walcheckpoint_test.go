package sqlite_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/sqlite"
)

// TestCheckpointsRunBesideTheWriter: the WAL is copied into the database
// file by the checkpointer about every CheckpointPages pages, so it stays
// far below what the commits wrote (the writer's own automatic checkpoint
// waits for many times more), and every event survives a reopen.
func TestCheckpointsRunBesideTheWriter(t *testing.T) {
	for _, mode := range syncModes {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, mode)
			if !sqlite.ReadsWALIndex(s) {
				t.Fatal("the checkpointer cannot read the WAL index")
			}
			if err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateRun("t", store.Run{ID: "r"}) }); err != nil {
				t.Fatal(err)
			}
			body := bytes.Repeat([]byte("x"), 6000) // two overflow pages an event
			const commits = 2500                    // over 3 pages each: 7,500 and more written
			for i := range commits {
				err := s.Update(ctx, func(tx store.Tx) error {
					_, err := tx.AppendEvent("t", "r", func(uint64) ([]byte, error) { return append(body, fmt.Sprint(i)...), nil })
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				sqlite.SettleCheckpoints(s)
			}
			fi, err := os.Stat(filepath.Join(dir, "oecp.db-wal"))
			if err != nil {
				t.Fatal(err)
			}
			if limit := int64(3 * sqlite.CheckpointPages * 4096); fi.Size() > limit {
				t.Fatalf("WAL of %d bytes after %d commits; the checkpointer keeps it under %d", fi.Size(), commits, limit)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, mode)
			defer s.Close()
			err = s.View(ctx, func(tx store.ReadTx) error {
				evs, err := tx.Events("t", "r", 0, commits+1)
				if err != nil {
					return err
				}
				if len(evs) != commits || !bytes.HasSuffix(evs[commits-1].Body, fmt.Append(nil, commits-1)) {
					return fmt.Errorf("%d events after reopen, want %d", len(evs), commits)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
