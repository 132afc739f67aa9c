package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store/postgres/pgtest"
	"github.com/oecp/oecp/store/storetest"
)

// TestMigrateCheckpoints opens a schema whose runs' checkpoints are
// clusters records: Open moves each of an existing run to the
// checkpoints table.
func TestMigrateCheckpoints(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	version := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "CREATE TABLE checkpoints") }) + 1
	cfg, _, err := poolConfig(Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrate(ctx, conn, schema, version-1); err != nil {
		t.Fatal(err)
	}
	for _, r := range storetest.LegacyRuns {
		if _, err := conn.Exec(ctx, `INSERT INTO runs (tenant, id, seed) VALUES ($1, $2, '')`, []byte(r[0]), []byte(r[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range storetest.LegacyRecords {
		if _, err := conn.Exec(ctx, `INSERT INTO clusters (tenant, version, data) VALUES ($1, 1, $2)`, []byte(r.Key), r.Data); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctx, Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckLegacyMigrated(t, s)
}
