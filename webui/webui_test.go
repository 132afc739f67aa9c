package webui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oecp/oecp/webui"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	if host := header.Get("Host"); host != "" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every page address under /ui/ answers the app, so a run's page can be
// bookmarked and reloaded.
func TestEveryPagePathAnswersTheApp(t *testing.T) {
	h := webui.New()
	for _, p := range []string{"/ui/", "/ui/runs/run-1", "/ui/runs/a%2Fb", "/ui/anything/else"} {
		r := get(t, h, http.MethodGet, p, nil)
		b := body(t, r)
		if r.StatusCode != http.StatusOK || !strings.Contains(b, `<script type="module" src="/ui/assets/js/app.js">`) {
			t.Errorf("GET %s: %d, want the app page", p, r.StatusCode)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
	}
}

func TestAssetsAreServedWithTheirTypes(t *testing.T) {
	h := webui.New()
	for p, want := range map[string]string{
		"/ui/assets/js/app.js": "text/javascript",
		"/ui/assets/style.css": "text/css",
		"/ui/assets/js/rpc.js": "text/javascript",
		"/ui/assets/icon.svg":  "image/svg+xml",
	} {
		r := get(t, h, http.MethodGet, p, nil)
		if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), want) {
			t.Errorf("GET %s: %d %q, want 200 %s", p, r.StatusCode, r.Header.Get("Content-Type"), want)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
	}
}

func TestMissingAssetIsNotFound(t *testing.T) {
	h := webui.New()
	for _, p := range []string{"/ui/assets/nope.js", "/ui/assets/index.html", "/ui/assets/"} {
		if r := get(t, h, http.MethodGet, p, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, r.StatusCode)
		}
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	h := webui.New()
	if r := get(t, h, http.MethodHead, "/ui/", nil); r.StatusCode != http.StatusOK {
		t.Errorf("HEAD: %d", r.StatusCode)
	}
	r := get(t, h, http.MethodPost, "/ui/", nil)
	if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d Allow %q", r.StatusCode, r.Header.Get("Allow"))
	}
}

// The page may connect to its own origin only, named for WebSocket too; a
// Host that could inject into the policy is left out.
func TestPolicyNamesTheOwnWebSocketOrigin(t *testing.T) {
	h := webui.New()
	cases := []struct{ host, want string }{
		{"127.0.0.1:7300", "connect-src 'self' ws://127.0.0.1:7300 wss://127.0.0.1:7300;"},
		{"[::1]:7300", "connect-src 'self' ws://[::1]:7300 wss://[::1]:7300;"},
		{"evil; script-src *", "connect-src 'self';"},
	}
	for _, c := range cases {
		r := get(t, h, http.MethodGet, "/ui/", http.Header{"Host": {c.host}})
		if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, c.want) {
			t.Errorf("Host %q: policy %q, want %q", c.host, csp, c.want)
		}
	}
}

// An unchanged asset revalidates to 304 through its ETag.
func TestETagRevalidates(t *testing.T) {
	h := webui.New()
	first := get(t, h, http.MethodGet, "/ui/assets/js/app.js", nil)
	etag := first.Header.Get("ETag")
	if etag == "" || first.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q Cache-Control %q", etag, first.Header.Get("Cache-Control"))
	}
	again := get(t, h, http.MethodGet, "/ui/assets/js/app.js", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", again.StatusCode)
	}
}
