// Package exporthttp serves run exports over HTTP on the server's
// listener: it resolves the request's identity as the WebSocket upgrade
// does, asks the run backend for the export under that identity, and
// streams it with a per-write deadline. It knows nothing of how an export
// is made.
package exporthttp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
)

// Path is the HTTP route of run exports on the server's listener: GET
// Path with the run id in place of {runId} and ?format=trace or
// ?format=semantic.
const Path = "/oecp/runs/{runId}/export"

// HeaderTraceID is the HTTP header of a run export that names the run's
// trace id (the web view reads it), sent while the server traces.
const HeaderTraceID = "Oecp-Trace-Id"

// Exporter writes a run's export in a format to w, under the identity of
// ctx; a refusal is a *protocol.Error. When w has a SetTraceID method the
// exporter names the run's trace id through it before the first write.
type Exporter interface {
	Export(ctx context.Context, runID, format string, w io.Writer) error
}

// exportStatus is the HTTP status of an export refused with a protocol
// error, by its data code.
var exportStatus = map[string]int{
	protocol.NotFound:         http.StatusNotFound,
	protocol.Gone:             http.StatusGone,
	protocol.SchemaViolation:  http.StatusBadRequest,
	protocol.StoreUnavailable: http.StatusServiceUnavailable,
}

// codeUnauthorized is the error code of an export request without a valid
// identity.
const codeUnauthorized = "UNAUTHORIZED"

// Handler serves run exports from e: the request's identity is resolved by
// resolver exactly as the WebSocket upgrade resolves it (nil: the local
// identity), and the run is looked up under its tenant, so another
// tenant's run is not found. A refusal is a JSON body
// {"error":{"code","message"}} with a matching HTTP status (401, 400, 404,
// 410, 503). The export streams; writeWindow (> 0) bounds each write, not
// the whole response. A failure once the body has started aborts the
// response, so a client never takes a cut export for a whole one: the
// footer is the last line.
func Handler(e Exporter, resolver identity.Resolver, writeWindow time.Duration, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			exportError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "use GET")
			return
		}
		id := identity.Local()
		if resolver != nil {
			var err error
			if id, err = resolver.Resolve(r); err != nil {
				exportError(w, http.StatusUnauthorized, codeUnauthorized, "missing, unknown or expired bearer token")
				return
			}
		}
		if id.ExpiredAt(time.Now()) {
			exportError(w, http.StatusUnauthorized, codeUnauthorized, "identity expired")
			return
		}
		runID, format := r.PathValue("runId"), r.URL.Query().Get("format")
		ew := &exportWriter{w: w, rc: http.NewResponseController(w), window: writeWindow, runID: runID, format: format}
		err := e.Export(identity.With(r.Context(), id), runID, format, ew)
		if err == nil {
			return
		}
		if !ew.started {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				status, ok := exportStatus[pe.DataCode]
				if !ok {
					status = http.StatusInternalServerError
				}
				exportError(w, status, pe.DataCode, pe.Message)
				return
			}
			log.Error("run export failed", "run", runID, "err", err)
			exportError(w, http.StatusInternalServerError, protocol.InternalErrorCode, "the export could not be read")
			return
		}
		log.Warn("run export cut off", "run", runID, "err", err)
		panic(http.ErrAbortHandler)
	})
}

// exportWriter sends the headers with the first bytes and gives each
// write its own deadline.
type exportWriter struct {
	w             http.ResponseWriter
	rc            *http.ResponseController
	window        time.Duration
	runID, format string
	started       bool
	// traceID, when set, is sent as the Oecp-Trace-Id header.
	traceID string
}

// SetTraceID names the run's trace id, sent as HeaderTraceID.
func (e *exportWriter) SetTraceID(id string) { e.traceID = id }

func (e *exportWriter) Write(p []byte) (int, error) {
	if !e.started {
		e.started = true
		h := e.w.Header()
		h.Set("Content-Type", "application/jsonl; charset=utf-8")
		h.Set("Content-Disposition", `attachment; filename="`+e.runID+"."+e.format+`.jsonl"`)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		if e.traceID != "" {
			h.Set(HeaderTraceID, e.traceID)
		}
	}
	if e.window > 0 {
		_ = e.rc.SetWriteDeadline(time.Now().Add(e.window))
	}
	return e.w.Write(p)
}

func exportError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	_, _ = w.Write(append(body, '\n'))
}
