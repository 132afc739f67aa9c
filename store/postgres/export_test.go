package postgres

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// BroadcastChannel is the NOTIFY channel s listens on.
func BroadcastChannel(s *Store) string { return s.channel }

// HalfReceived counts the broadcast messages s holds some parts of.
func HalfReceived(s *Store) int {
	s.bc.mu.Lock()
	defer s.bc.mu.Unlock()
	return len(s.bc.parts)
}

// MigrateTo migrates the schema dsn names to version v only, to build
// old-version schemas for the migration tests.
func MigrateTo(ctx context.Context, dsn string, v int) error {
	cfg, schema, err := poolConfig(Options{DSN: dsn})
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = migrate(ctx, conn, schema, v)
	return err
}

// CheckpointsVersion is the schema version that made the checkpoints
// table.
var CheckpointsVersion = slices.IndexFunc(migrations, func(m string) bool {
	return strings.Contains(m, "CREATE TABLE checkpoints")
}) + 1
