// Package pgtest gives tests a PostgreSQL schema of their own. The server
// is named by $OECP_TEST_POSTGRES (default DefaultDSN). A test that asks
// for a schema while no server answers is skipped with one line saying so,
// or failed when $OECP_REQUIRE_POSTGRES is 1. It is for tests only.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables and the default server.
const (
	EnvDSN     = "OECP_TEST_POSTGRES"
	EnvRequire = "OECP_REQUIRE_POSTGRES"
	DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// ServerDSN is the DSN of the test server.
func ServerDSN() string {
	if d := os.Getenv(EnvDSN); d != "" {
		return d
	}
	return DefaultDSN
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Available reports whether the test server answers (probed once per
// process).
func Available() error {
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, ServerDSN())
		if err != nil {
			probeErr = err
			return
		}
		probeErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	return probeErr
}

// Require skips t, or fails it under OECP_REQUIRE_POSTGRES=1, when the test
// server does not answer.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		msg := fmt.Sprintf("no PostgreSQL at %s (%v); set %s to a server", redact(ServerDSN()), err, EnvDSN)
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal(msg + " (" + EnvRequire + "=1)")
		}
		t.Skip(msg)
	}
}

// Schema returns a DSN whose search_path is a fresh schema (not created:
// the store creates it), dropped with everything in it when t ends.
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "oecp_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { Drop(t, schema) })
	return WithSearchPath(ServerDSN(), schema), schema
}

// WithSearchPath sets search_path in a URL or key=value DSN.
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}

// Drop drops a schema and everything in it.
func Drop(t testing.TB, schema string) {
	t.Helper()
	Exec(t, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// Exec runs one statement on the test server.
func Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, ServerDSN())
	if err != nil {
		t.Errorf("pgtest: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Errorf("pgtest: %s: %v", sql, err)
	}
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return dsn
}
