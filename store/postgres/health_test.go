package postgres_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// roleStore opens a store on a fresh schema as a role of its own, whose
// connections carry a unique application_name; it returns the store, the
// role and that name.
func roleStore(t *testing.T) (*postgres.Store, string, string) {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	role := "oecp_test_role_" + hex.EncodeToString(b[:])
	id := pgx.Identifier{role}.Sanitize()
	pgtest.Exec(t, "CREATE ROLE "+id+" LOGIN")
	pgtest.Exec(t, "GRANT CREATE ON DATABASE "+pgx.Identifier{dbName(t, dsn)}.Sanitize()+" TO "+id)
	t.Cleanup(func() {
		pgtest.Drop(t, schema)
		pgtest.Exec(t, "DROP OWNED BY "+id)
		pgtest.Exec(t, "DROP ROLE "+id)
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("the test server's DSN is not a URL: %v", err)
	}
	u.User = url.User(role)
	q := u.Query()
	q.Set("application_name", role)
	u.RawQuery = q.Encode()
	return openOn(t, u.String(), postgres.Options{}), role, id
}

func dbName(t *testing.T, dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// cutConnections ends every server connection of application name app.
func cutConnections(t *testing.T, app string) {
	pgtest.Exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app)
}

// put commits one cluster record write.
func put(s *postgres.Store, tenant string) error {
	return s.Update(ctx, func(tx store.Tx) error {
		return tx.PutCluster(tenant, store.Cluster{Version: 1, Data: []byte("{}")})
	})
}

// TestReadOnlyIsUnavailable: once the database refuses writes (the role
// is made read-only and its connections are cut, so the server ends them
// with admin_shutdown), a write fails with store.ErrUnavailable and so
// does Ping, while a read still succeeds; once writes are allowed again,
// Ping and writes succeed.
func TestReadOnlyIsUnavailable(t *testing.T) {
	s, role, id := roleStore(t)
	must(t, s.Ping(ctx))
	must(t, put(s, "a"))

	pgtest.Exec(t, "ALTER ROLE "+id+" SET default_transaction_read_only = on")
	cutConnections(t, role)
	if err := put(s, "b"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write on a read-only database: %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping of a read-only database: %v, want ErrUnavailable", err)
	}
	must(t, s.View(ctx, func(tx store.ReadTx) error { _, _, err := tx.Cluster("a"); return err }))

	pgtest.Exec(t, "ALTER ROLE "+id+" RESET default_transaction_read_only")
	cutConnections(t, role)
	must(t, s.Ping(ctx))
	must(t, put(s, "b"))
}

// TestRefusedConnectionIsUnavailable: a server that refuses connections
// makes Open fail with store.ErrUnavailable.
func TestRefusedConnectionIsUnavailable(t *testing.T) {
	_, err := postgres.Open(ctx, postgres.Options{DSN: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5"})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a refused connection: %v, want ErrUnavailable", err)
	}
}

// TestClosedStorePing: a closed store's Ping fails with store.ErrClosed.
func TestClosedStorePing(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	s, err := postgres.Open(ctx, postgres.Options{DSN: dsn})
	must(t, err)
	must(t, s.Close())
	if err := s.Ping(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Ping after Close: %v", err)
	}
}

// TestLeaseCallsOnADownDatabaseAreUnavailable: the lease statements (a
// renewal, an acquisition, a release) that meet a database refusing
// connections fail with store.ErrUnavailable, like transactions, so that
// their callers hold what they would otherwise drop.
func TestLeaseCallsOnADownDatabaseAreUnavailable(t *testing.T) {
	s, role, id := roleStore(t)
	name := store.RunLease("t", "r")
	epoch, err := s.AcquireLease(ctx, name, "me")
	must(t, err)
	pgtest.Exec(t, "ALTER ROLE "+id+" CONNECTION LIMIT 0")
	defer pgtest.Exec(t, "ALTER ROLE "+id+" CONNECTION LIMIT -1")
	cutConnections(t, role)
	if _, err := s.RenewLeases(ctx, "me"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("renewal on a database refusing connections: %v, want ErrUnavailable", err)
	}
	if _, err := s.AcquireLease(ctx, store.RunLease("t", "other"), "me"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("acquisition on a database refusing connections: %v, want ErrUnavailable", err)
	}
	if err := s.ReleaseLease(ctx, name, "me", epoch); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("release on a database refusing connections: %v, want ErrUnavailable", err)
	}
}
