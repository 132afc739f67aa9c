package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oecp/oecp/store"
)

// TestClassify: the failures of the database or the way to it wrap
// store.ErrUnavailable; conflicts, constraint violations and a caller's
// cancellation do not.
func TestClassify(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"disk full", context.Background(), &pgconn.PgError{Code: "53100"}, true},
		{"out of memory", context.Background(), &pgconn.PgError{Code: "53200"}, true},
		{"read-only", context.Background(), &pgconn.PgError{Code: "25006"}, true},
		{"admin shutdown", context.Background(), &pgconn.PgError{Code: "57P01"}, true},
		{"cannot connect now", context.Background(), &pgconn.PgError{Code: "57P03"}, true},
		{"io error", context.Background(), &pgconn.PgError{Code: "58030"}, true},
		{"connection failure", context.Background(), &pgconn.PgError{Code: "08006"}, true},
		{"data corrupted", context.Background(), &pgconn.PgError{Code: "XX001"}, true},
		{"lost connection", context.Background(), fmt.Errorf("store/postgres: read: %w", io.ErrUnexpectedEOF), true},
		{"commit unknown", context.Background(), fmt.Errorf("%w: %w", ErrCommitUnknown, io.EOF), false},
		{"serialization", context.Background(), &pgconn.PgError{Code: "40001"}, false},
		{"unique violation", context.Background(), &pgconn.PgError{Code: "23505"}, false},
		{"statement timeout", context.Background(), &pgconn.PgError{Code: "57014"}, false},
		{"other", context.Background(), errors.New("boom"), false},
		{"cancelled caller", cancelled, io.ErrUnexpectedEOF, false},
	} {
		if got := errors.Is(classify(c.ctx, c.err), store.ErrUnavailable); got != c.want {
			t.Errorf("%s: unavailable %v, want %v", c.name, got, c.want)
		}
	}
}
