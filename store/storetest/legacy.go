package storetest

import (
	"fmt"
	"testing"

	"github.com/oecp/oecp/store"
)

// LegacyRecord is a clusters-table record of a database written before
// runs' checkpoints and states had tables of their own: a checkpoint was
// kept under its run's tenant key + "/" + run id + "#checkpoint", a state
// under its run's tenant key + "/" + run id.
type LegacyRecord struct {
	Key  string
	Data []byte
	// Version is the record's version (0: 1); a moved state keeps it.
	Version uint64
	// RunTenant and RunID name the run whose checkpoint (State false) or
	// state (State true) it is, when the record is one and the run
	// exists: the migrations move it.
	RunTenant, RunID string
	State            bool
}

// LegacyRuns are the runs (tenant, id) of the legacy database.
var LegacyRuns = [][2]string{
	{`n:"a/b"`, "r1"}, {`n:"ü"`, "r2"}, {"n*", "r3"}, {`n:"q\\"`, "r4"}, {`n:"c"`, "r5"},
	{"t:acme", "run-1"}, // a v1 run
}

// LegacyRecords are its clusters records: checkpoints of runs that exist
// (tenant keys with '/', a backslash, non-ASCII), one of a run that is
// gone, and records that are no checkpoint.
var LegacyRecords = []LegacyRecord{
	{Key: `n:"a/b"/r1#checkpoint`, Data: []byte("bundle of r1"), RunTenant: `n:"a/b"`, RunID: "r1"},
	{Key: `n:"ü"/r2#checkpoint`, Data: []byte("bundle of r2"), RunTenant: `n:"ü"`, RunID: "r2"},
	{Key: "n*/r3#checkpoint", Data: []byte("bundle of r3"), RunTenant: "n*", RunID: "r3"},
	{Key: `n:"q\\"/r4#checkpoint`, Data: []byte("bundle of r4"), RunTenant: `n:"q\\"`, RunID: "r4"},
	{Key: `n:"x"/gone#checkpoint`, Data: []byte("run is gone")},
	{Key: "t:v1#checkpoint", Data: []byte("a v1 tenant's cluster")},
	{Key: `n:"a/b"/r1`, Data: []byte("state of r1"), RunTenant: `n:"a/b"`, RunID: "r1", State: true, Version: 7},
	{Key: "n*/r3", Data: []byte("state of r3"), RunTenant: "n*", RunID: "r3", State: true, Version: 2},
	{Key: "t:acme/run-1", Data: []byte("the v1 cluster of tenant acme/run-1")},
	{Key: `n:"q\\"/r4`, Data: []byte("state of r4"), RunTenant: `n:"q\\"`, RunID: "r4", State: true},
	{Key: `n:"ü"/r2`, Data: []byte("state of r2"), RunTenant: `n:"ü"`, RunID: "r2", State: true},
	{Key: `n:"x"/gone`, Data: []byte("state of a run that is gone")},
	{Key: `n:"a/b"`, Data: []byte("a tenant key alone")},
}

// Ver is the record's version as written.
func (r LegacyRecord) Ver() uint64 { return max(r.Version, 1) }

// CheckLegacyMigrated checks a store opened on the legacy database: each
// checkpoint or state of an existing run is its run's Checkpoint or
// RunState (at its version) and no longer a clusters record; every other
// record is where it was.
func CheckLegacyMigrated(t *testing.T, s store.Store) {
	t.Helper()
	must(t, s.View(ctx, func(tx store.ReadTx) error {
		for _, r := range LegacyRecords {
			c, inClusters, err := tx.Cluster(r.Key)
			if err != nil {
				return err
			}
			if r.RunID == "" {
				if !inClusters || string(c.Data) != string(r.Data) {
					return fmt.Errorf("record %q lost by the migration: %q %v", r.Key, c.Data, inClusters)
				}
				continue
			}
			if inClusters {
				return fmt.Errorf("record %q left in the clusters table", r.Key)
			}
			if r.State {
				st, ok, err := tx.RunState(r.RunTenant, r.RunID)
				if err != nil || !ok || st.Version != r.Ver() || string(st.Data) != string(r.Data) {
					return fmt.Errorf("state of %s/%s after the migration: %+v %v %v, want %q", r.RunTenant, r.RunID, st, ok, err, r.Data)
				}
				continue
			}
			if err := checkpointIn(tx, r.RunTenant, r.RunID, r.Data); err != nil {
				return err
			}
		}
		if st, ok, err := tx.RunState(`n:"c"`, "r5"); err != nil || ok {
			return fmt.Errorf("r5 has a state after the migration: %+v %v %v", st, ok, err)
		}
		return checkpointIn(tx, `n:"c"`, "r5", nil)
	}))
}
