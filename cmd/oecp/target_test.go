package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// targetEnv is an environment with a configuration directory of its own
// (returned) and no local server.
func targetEnv(t *testing.T, extra ...string) ([]string, string) {
	t.Helper()
	root := t.TempDir()
	cfg := filepath.Join(root, "config")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(root, "home"), "XDG_CONFIG_HOME=" + cfg,
		"XDG_CACHE_HOME=" + filepath.Join(root, "cache"), noAutoServerEnv + "=1"}
	return append(env, extra...), filepath.Join(cfg, "oecp", configFileName)
}

// TestCLITargets: target add, use and list keep named servers in
// $XDG_CONFIG_HOME/oecp/config.yaml (mode 0600); a command goes to
// --server, else OECP_SERVER, else the current target; --token-file
// overrides the target's token file. An unknown or duplicate name is a
// clear error that leaves the file as it was.
func TestCLITargets(t *testing.T) {
	srv := startServer(t)
	env, path := targetEnv(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := "ws://" + testkit.FreeAddr(t) + "/oecp"
	expect(t, runEnv(t, "", env, "target", "list"), 0, []string{"no targets"}, nil)
	expect(t, runEnv(t, "", env, "target", "add", "dev", "--url", srv.url), 0, []string{"added target dev: " + srv.url, "oecp target use dev"}, nil)
	expect(t, runEnv(t, dir, env, "target", "add", "prod", "--url", dead, "--token-file", "token"), 0, []string{"added target prod"}, nil)
	// No current target yet: the default address (nothing there, and no
	// local server in this environment).
	expect(t, runEnv(t, "", env, "get"), 2, nil, []string{"cannot talk to the server at " + defaultServerURL})

	expect(t, runEnv(t, "", env, "target", "use", "dev"), 0, []string{"current target: dev (" + srv.url + ")"}, nil)
	expect(t, runEnv(t, "", env, "target", "list"), 0, []string{"*        dev   " + srv.url, "prod  " + dead + "  " + token}, nil)
	var list []targetListing
	r := runEnv(t, "", env, "target", "list", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 || !list[0].Current || list[0].Name != "dev" ||
		list[1].TokenFile != token || list[1].Current {
		t.Fatalf("target list --json: %s %v", r.stdout, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, fi.Mode(), err)
	}
	saved, _ := os.ReadFile(path)
	if strings.Contains(string(saved), "secret") {
		t.Fatalf("the token was copied into %s:\n%s", path, saved)
	}

	// The current target, then OECP_SERVER over it, then --server over both.
	expect(t, runEnv(t, "", env, "get"), 0, []string{"phase:"}, nil)
	expect(t, runEnv(t, "", append(env, "OECP_SERVER="+dead), "get"), 2, nil, []string{"cannot talk to the server at " + dead})
	expect(t, runEnv(t, "", append(env, "OECP_SERVER="+dead), "get", "--server", srv.url), 0, []string{"phase:"}, nil)

	// prod's token file is read; --token-file overrides it.
	expect(t, runEnv(t, "", env, "target", "use", "prod"), 0, nil, nil)
	if err := os.Remove(token); err != nil {
		t.Fatal(err)
	}
	expect(t, runEnv(t, "", env, "get"), 2, nil, []string{"read --token-file", token})
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, runEnv(t, "", env, "get", "--token-file", other), 2, nil, []string{"cannot talk to the server at " + dead, "the current target, prod"})

	before, _ := os.ReadFile(path)
	expect(t, runEnv(t, "", env, "target", "use", "nope"), 2, nil, []string{`no target named "nope" (known: dev, prod)`})
	expect(t, runEnv(t, "", env, "target", "add", "dev", "--url", dead), 2, nil, []string{"a target named dev exists already"})
	expect(t, runEnv(t, "", env, "target", "add", "x", "--url", "http://example.com"), 2, nil, []string{"want ws:// or wss://"})
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatalf("a refused command changed %s:\n%s", path, after)
	}
	expect(t, runEnv(t, "", env, "target", "remove", "prod"), 0, []string{"removed target prod"}, nil)
	expect(t, runEnv(t, "", env, "target", "list"), 0, []string{"dev"}, nil)
	expect(t, runEnv(t, "", env, "get"), 2, nil, []string{"cannot talk to the server at " + defaultServerURL})
}

// TestCLITargetConfigMalformed: a configuration file the CLI cannot read
// is an error naming the file and what is wrong (the line, where YAML
// knows it), for target commands and client commands alike; nothing is
// dialled and nothing rewritten.
func TestCLITargetConfigMalformed(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"targets:\n  dev:\n    url: ws://127.0.0.1:1/oecp\n    token: abc\n", "line 4: unknown key token"},
		{"targets:\n  dev:\n    url: [\n", "line 3"},
		{"current-target: prod\ntargets:\n  dev:\n    url: ws://127.0.0.1:1/oecp\n", `current-target "prod" is not among the targets (known: dev)`},
		{"targets:\n  dev:\n    url: http://127.0.0.1:1/oecp\n", `target dev: url "http://127.0.0.1:1/oecp": want ws:// or wss://`},
		{"targets:\n  dev: {}\n", "target dev has no url"},
		{"targets: [dev]\n", "line 1: a value of the wrong kind (!!seq) here"},
	} {
		env, path := targetEnv(t)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"get"}, {"run", "list"}, {"target", "list"}, {"target", "use", "dev"}} {
			r := runEnv(t, "", env, args...)
			expect(t, r, 2, nil, []string{path + " is not a valid oecp configuration", tc.want})
			if strings.Contains(r.stderr, "cannot talk") {
				t.Errorf("%v dialled with a malformed configuration:\n%s", args, r.stderr)
			}
		}
		if after, _ := os.ReadFile(path); string(after) != tc.content {
			t.Errorf("%s was rewritten:\n%s", path, after)
		}
	}
}
