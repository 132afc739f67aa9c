package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/storetest"
)

func TestMain(m *testing.M) { testkit.Main(m) }

var ctx = context.Background()

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// openOn opens a store on dsn, closed when t ends.
func openOn(t testing.TB, dsn string, opt postgres.Options) *postgres.Store {
	t.Helper()
	opt.DSN = dsn
	s, err := postgres.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// open opens a store on a fresh schema.
func open(t testing.TB, opt postgres.Options) *postgres.Store {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	return openOn(t, dsn, opt)
}

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, postgres.Options{}) })
	// The lease suite assumes that a lease held by another owner belongs to
	// a process that is gone (a local store's assumption): a TTL of one
	// microsecond makes every lease expired by the next statement.
	t.Run("Leases", func(t *testing.T) {
		storetest.RunLeases(t, func(t *testing.T) store.Store { return open(t, postgres.Options{LeaseTTL: time.Microsecond}) })
	})
}

// TestMigrateCheckpointsAndRunStates opens a schema whose runs'
// checkpoints and states are clusters records: Open moves each of an
// existing run to the checkpoints and run_states tables.
func TestMigrateCheckpointsAndRunStates(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	must(t, postgres.MigrateTo(bounded, dsn, postgres.CheckpointsVersion-1))
	for _, r := range storetest.LegacyRuns {
		pgtest.Exec(t, "INSERT INTO "+schema+".runs (tenant, id, seed) VALUES ($1, $2, '')", []byte(r[0]), []byte(r[1]))
	}
	for _, r := range storetest.LegacyRecords {
		pgtest.Exec(t, "INSERT INTO "+schema+".clusters (tenant, version, data) VALUES ($1, $2, $3)", []byte(r.Key), int64(r.Ver()), r.Data)
	}
	storetest.CheckLegacyMigrated(t, openOn(t, dsn, postgres.Options{}))
}
