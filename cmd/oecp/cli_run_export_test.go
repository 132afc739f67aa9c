package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIRunExport exports the native example through the built binary
// against a server with tokens: the trace and the semantic view end with a
// complete footer, --output writes a new file holding exactly what stdout
// gets and never replaces one, another tenant's token finds no run, and an
// unknown run is not found. The HTTP route answers refusals as JSON.
func TestCLIRunExport(t *testing.T) {
	dir := t.TempDir()
	toks := writeSecret(t, filepath.Join(dir, "tokens.json"), `[
 {"token":"alice-token","principal":"alice","tenant":"t1","expiresAt":"2999-01-01T00:00:00Z"},
 {"token":"eve-token","principal":"eve","tenant":"t2","expiresAt":"2999-01-01T00:00:00Z"}]`)
	alice := writeSecret(t, filepath.Join(dir, "alice"), "alice-token\n")
	eve := writeSecret(t, filepath.Join(dir, "eve"), "eve-token\n")
	srv := startServer(t, "--harness", nativeHarness(t), "--auth-tokens", toks)
	expect(t, oecp(t, srv, "run", "submit", "-f", exampleGraph, "--runtime", exampleRuntime, "--input", exampleInput,
		"--source", testSource, "--id", "ex-1", "--watch", "--token-file", alice), 0, []string{"succeeded"}, nil)

	trace := oecp(t, srv, "run", "export", "ex-1", "--token-file", alice)
	expect(t, trace, 0, []string{`{"record":"header","runId":"ex-1","format":"trace","version":1}` + "\n",
		`{"record":"prompt","execution":"ex-1/draft/1","turn":0,"via":"stdin","data":"{\"prompt\":\"Execute this graph node`,
		`{"record":"footer","complete":true,"missing":[]}` + "\n"}, nil)
	file := filepath.Join(dir, "ex-1.trace.jsonl")
	expect(t, oecp(t, srv, "run", "export", "ex-1", "--format", "trace", "--output", file, "--token-file", alice), 0, nil, nil)
	if got, _ := os.ReadFile(file); string(got) != trace.stdout {
		t.Fatalf("--output wrote another export than stdout got:\n%s\n---\n%s", got, trace.stdout)
	}
	expect(t, oecp(t, srv, "run", "export", "ex-1", "--format", "semantic", "--output", file, "--token-file", alice), 1, nil,
		[]string{"oecp run export: --output " + file + " already exists: it was left untouched"})
	if got, _ := os.ReadFile(file); string(got) != trace.stdout {
		t.Fatal("a refused --output changed the file")
	}
	expect(t, oecp(t, srv, "run", "export", "ex-1", "--format", "semantic", "--token-file", alice), 0,
		[]string{`{"record":"header","runId":"ex-1","format":"semantic","version":1}` + "\n", `{"type":"text","execution":"ex-1/draft/1","turn":0,`,
			`"unparsed":0}` + "\n"}, nil)

	missing := filepath.Join(dir, "not-written.jsonl")
	expect(t, oecp(t, srv, "run", "export", "ex-1", "--output", missing, "--token-file", eve), 1, nil, []string{"run ex-1 was not found"})
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a refused export left %s behind: %v", missing, err)
	}
	expect(t, oecp(t, srv, "run", "export", "nope", "--token-file", alice), 1, nil, []string{"run nope was not found"})
	expect(t, oecp(t, srv, "run", "export", "ex-1", "--format", "yaml", "--token-file", alice), 2, nil, []string{"--format \"yaml\": want trace or semantic"})
	expect(t, oecp(t, srv, "run", "export", "ex-1"), 2, nil, []string{"the server refused the token"})

	base := "http" + strings.TrimSuffix(strings.TrimPrefix(srv.url, "ws"), "/oecp") + "/oecp/runs/ex-1/export?format=trace"
	for _, tc := range []struct {
		token, body string
		status      int
	}{{"", `{"error":{"code":"UNAUTHORIZED"`, 401}, {"eve-token", `{"error":{"code":"NOT_FOUND"`, 404}, {"alice-token", `{"record":"header"`, 200}} {
		req, _ := http.NewRequest(http.MethodGet, base, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.HasPrefix(b.String(), tc.body) {
			t.Fatalf("GET as %q: %d %s", tc.token, resp.StatusCode, b.String())
		}
	}
}
