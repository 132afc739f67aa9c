package main

import (
	"net/http"
	"net/url"
	"path/filepath"
	"syscall"
	"testing"
)

// probe GETs path on the server of wsURL with the given Host header and
// returns the status.
func probe(t *testing.T, wsURL, host, path string) int {
	t.Helper()
	u, err := url.Parse(wsURL)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("GET", "http://"+u.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestProbesAndHostRule: the probes and metrics need no token; a server
// without authentication answers loopback Host names only (the web view
// from localhost and 127.0.0.1 alike) and 421 to any other; one with
// tokens answers any Host.
func TestProbesAndHostRule(t *testing.T) {
	open := startServer(t)
	_, port, _ := netSplit(open.url)
	for _, host := range []string{"", "localhost:" + port, "127.0.0.1:" + port} {
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/ui/"} {
			if code := probe(t, open.url, host, path); code != http.StatusOK {
				t.Errorf("Host %q %s: HTTP %d, want 200", host, path, code)
			}
		}
	}
	for _, path := range []string{"/healthz", "/ui/", "/oecp"} {
		if code := probe(t, open.url, "evil.example:"+port, path); code != http.StatusMisdirectedRequest {
			t.Errorf("Host evil.example %s: HTTP %d, want 421", path, code)
		}
	}

	toks := writeSecret(t, filepath.Join(t.TempDir(), "tokens.json"), `[{"token":"t","principal":"p","tenant":"a","expiresAt":"2999-01-01T00:00:00Z"}]`)
	authed := startServer(t, "--auth-tokens", toks)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code := probe(t, authed.url, "oecp.example:443", path); code != http.StatusOK {
			t.Errorf("authenticated server %s without a token: HTTP %d, want 200", path, code)
		}
	}
}

func netSplit(wsURL string) (host, port string, err error) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return "", "", err
	}
	return u.Hostname(), u.Port(), nil
}

// TestSIGTERMFailsReadinessFirst: on SIGTERM /readyz answers 503 while
// the listener still accepts (for --drain-delay), so a load balancer
// moves away before connections close.
func TestSIGTERMFailsReadinessFirst(t *testing.T) {
	srv := startServer(t, "--drain-delay", "3s")
	if code := probe(t, srv.url, "", "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: HTTP %d", code)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		code := probe(t, srv.url, "", "/readyz")
		if code == http.StatusServiceUnavailable {
			break
		}
		if code != http.StatusOK {
			t.Fatalf("/readyz after SIGTERM: HTTP %d", code)
		}
	}
	if code := probe(t, srv.url, "", "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while draining: HTTP %d, want 200 (liveness)", code)
	}
}
