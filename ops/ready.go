package ops

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/oecp/oecp/store"
)

// Readiness answers /readyz: 200 only while the store answers (its Ping:
// on SQLite and PostgreSQL a read and a write probe) and the server is not
// draining. /healthz (liveness) stays unconditional.
type Readiness struct {
	// Store is checked on every probe (nil: no store, always answers).
	Store store.Store
	// Timeout bounds one store check (default 2s).
	Timeout time.Duration

	draining atomic.Bool
}

// errDraining is the readiness failure once Drain was called.
var errDraining = errors.New("draining")

// Drain makes every later probe fail: a server that received SIGTERM
// calls it before it stops accepting, so load balancers move away first.
func (r *Readiness) Drain() { r.draining.Store(true) }

// Check reports why the server is not ready (nil: ready).
func (r *Readiness) Check(ctx context.Context) error {
	if r.draining.Load() {
		return errDraining
	}
	if r.Store == nil {
		return nil
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.Store.Ping(ctx)
}

// ServeHTTP answers 200 "ready" or 503 with the reason.
func (r *Readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := r.Check(req.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		msg := "not ready: draining\n"
		if !errors.Is(err, errDraining) {
			msg = "not ready: store does not answer\n"
		}
		_, _ = io.WriteString(w, msg)
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}
