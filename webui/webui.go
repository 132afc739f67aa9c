// Package webui is the live web view of oecp: a page that lists the runs an
// identity can see and draws one run's graph, timeline, logs and live
// output. It is a client of the server like any other: JSON-RPC over the
// /oecp WebSocket, a native run's exports from their HTTP route
// (transport/exporthttp) and /healthz; this package has no API of its own
// and only serves its embedded static assets (plain ES modules and CSS, no
// build step), with the server's settings the page needs written into the
// app page (WithCredentials, WithTraceURL).
//
// Mount Handler at /ui/. Every /ui/… path answers the app page, so a run's
// page (/ui/runs/<runId>) is a stable address; /ui/assets/<file> answers
// the embedded file, and a missing asset is 404.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
)

// Prefix is where Handler expects to be mounted.
const Prefix = "/ui/"

//go:embed assets
var embedded embed.FS

// contentSecurityPolicy lets the page load only its own scripts, styles and
// images, and connect only to its own origin (the /oecp WebSocket and
// /healthz); it may not be framed or submit a form anywhere. The WebSocket
// origin is also named explicitly (ws:// and wss:// at the request's host),
// for browsers whose 'self' does not cover WebSocket schemes.
func contentSecurityPolicy(host string) string {
	connect := "'self'"
	if validHost.MatchString(host) {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + connect + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// validHost is a Host header that can stand in a CSP source as it is.
var validHost = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)

// file is one embedded asset with its validator.
type file struct {
	body []byte
	etag string
	mime string
}

// Handler serves the web view. It is safe for concurrent use.
type Handler struct {
	files map[string]file // by path below assets/, e.g. "js/app.js"
}

// New loads the embedded assets.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	err := fs.WalkDir(embedded, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		typ := mime.TypeByExtension(path.Ext(p))
		if typ == "" {
			typ = "application/octet-stream"
		}
		h.files[strings.TrimPrefix(p, "assets/")] = file{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, mime: typ}
		return nil
	})
	if err != nil {
		// The assets are compiled in: a walk error is a broken build.
		panic("webui: embedded assets: " + err.Error())
	}
	return h
}

// ServeHTTP answers GET and HEAD: /ui/assets/<file> with that file, any
// other path with the app page (index.html).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := "index.html"
	if rest, ok := strings.CutPrefix(r.URL.Path, Prefix+"assets/"); ok {
		name = rest
		if _, found := h.files[name]; !found || name == "index.html" {
			http.NotFound(w, r)
			return
		}
	}
	f := h.files[name]
	hd := w.Header()
	hd.Set("Content-Type", f.mime)
	hd.Set("Content-Security-Policy", contentSecurityPolicy(r.Host))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	// Revalidate every time: the ETag makes that a 304 when nothing changed,
	// and a new binary's assets are never mixed with an old page.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
