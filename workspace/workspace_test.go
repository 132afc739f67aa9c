package workspace_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func repos(t *testing.T, entries map[string]workspace.Repo) *workspace.Repos {
	t.Helper()
	b, _ := json.Marshal(entries)
	r, err := workspace.ParseRepos("repos.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func manager(t *testing.T, r *workspace.Repos, keep time.Duration) *workspace.Manager {
	m := workspace.NewManager(t.TempDir(), r, keep, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	return m
}

func TestParseRepos(t *testing.T) {
	r, err := workspace.ParseRepos("r.json", []byte(`{"acme/app":{"url":"https://github.com/acme/app.git","tokenEnv":"ACME_TOKEN","forge":{"argv":["/opt/gh"],"host":"ghe.acme.test"}},"acme/lib":{"url":"/srv/lib.git"}}`))
	if err != nil {
		t.Fatal(err)
	}
	app, ok := r.Lookup("acme/app")
	if f := app.ForgeCLI(); !ok || f.Argv[0] != "/opt/gh" || f.Host != "ghe.acme.test" || app.TokenEnv != "ACME_TOKEN" {
		t.Fatalf("acme/app %+v", app)
	}
	lib, _ := r.Lookup("acme/lib")
	if f := lib.ForgeCLI(); f.Argv[0] != "gh" || f.Host != "github.com" {
		t.Fatalf("defaults %+v", f)
	}
	if err := r.Check("t1", "acme/other"); !errors.Is(err, workspace.ErrNotServed) || strings.Contains(err.Error(), "r.json") {
		t.Fatalf("unlisted: %v", err)
	}
	if err := r.Check("t1", "acme/lib"); err != nil {
		t.Fatalf("listed for every tenant: %v", err)
	}
	for _, bad := range []string{`[]`, `{"acme":{"url":"x"}}`, `{"a/b":{"url":""}}`, `{"a/b":{"url":"x","tokenEnv":"BAD-NAME"}}`,
		`{"a/b":{"url":"x","secret":"y"}}`, `{"a/b":{"url":"x","tenants":[]}}`, `{"a/b":{"url":"x","tenants":[""]}}`, `{"a/b":{"url":"x","forge":{"argv":[]}}}`, `{"a/b":{"url":"x","forge":{"host":"a b"}}}`} {
		if _, err := workspace.ParseRepos("r.json", []byte(bad)); !errors.Is(err, workspace.ErrInvalidRepos) || !strings.Contains(err.Error(), "r.json") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestPrepareClonesTheRevisionOnTheRunBranch(t *testing.T) {
	remote := gittest.NewRemote(t)
	older := remote.Head()
	newer := remote.Commit("a.txt", "a\n", "second")
	remote.Push("refs/heads/main")
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}}), time.Hour)
	key := workspace.Key("tenant", "run-a")
	branch := workspace.Branch("tenant", "run-a")
	if err := m.Prepare(context.Background(), key, workspace.Source{Repository: "acme/app", Branch: "main", Revision: older}, branch); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Paths(key)
	if head := remote.Git(p.Workspace, "rev-parse", "HEAD"); head != older {
		t.Fatalf("HEAD %s, want %s (not %s)", head, older, newer)
	}
	if b := remote.Git(p.Workspace, "symbolic-ref", "--short", "HEAD"); b != branch || !strings.HasPrefix(b, "oecp/run-") || len(b) != len("oecp/run-")+20 {
		t.Fatalf("branch %q", b)
	}
	if _, err := os.Stat(filepath.Join(p.Workspace, "a.txt")); !os.IsNotExist(err) {
		t.Fatal("a.txt of the newer commit is checked out")
	}
	// Prepared again (a restart): the workspace and its edits stay.
	if err := os.WriteFile(filepath.Join(p.Workspace, "edit.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Prepare(context.Background(), key, workspace.Source{Repository: "acme/app", Branch: "main", Revision: older}, branch); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.Workspace, "edit.txt")); err != nil {
		t.Fatalf("re-prepared workspace lost its edit: %v", err)
	}
}

// A commit no branch holds is fetched by its id.
func TestPrepareFetchesAnUnbranchedCommit(t *testing.T) {
	remote := gittest.NewRemote(t)
	hidden := remote.Commit("b.txt", "b\n", "hidden")
	remote.Push("refs/pull/1/head")
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: remote.Dir}}), time.Hour)
	key := workspace.Key("t", "run-b")
	if err := m.Prepare(context.Background(), key, workspace.Source{Repository: "acme/app", Branch: "main", Revision: hidden}, workspace.Branch("t", "run-b")); err != nil {
		t.Fatal(err)
	}
	p, _ := m.Paths(key)
	if head := remote.Git(p.Workspace, "rev-parse", "HEAD"); head != hidden {
		t.Fatalf("HEAD %s", head)
	}
}

func TestPrepareRefusals(t *testing.T) {
	remote := gittest.NewRemote(t)
	m := manager(t, repos(t, map[string]workspace.Repo{
		"acme/app":     {URL: remote.Dir},
		"acme/gone":    {URL: filepath.Join(t.TempDir(), "missing.git")},
		"acme/private": {URL: remote.Dir, TokenEnv: "WORKSPACE_TEST_UNSET_TOKEN"},
	}), time.Hour)
	cases := []struct {
		repo, rev string
		want      error
		text      string
	}{
		{"acme/app", strings.Repeat("0", 40), workspace.ErrRevisionNotFound, "is not a commit"},
		{"acme/gone", remote.Head(), workspace.ErrUnavailable, "git fetch"},
		{"acme/private", remote.Head(), workspace.ErrUnavailable, "WORKSPACE_TEST_UNSET_TOKEN"},
		{"acme/unlisted", remote.Head(), workspace.ErrUnavailable, "--repos"},
	}
	for _, tc := range cases {
		err := m.Prepare(context.Background(), workspace.Key("t", "r-"+tc.repo[5:]), workspace.Source{Repository: tc.repo, Branch: "main", Revision: tc.rev}, "oecp/run-x")
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v", tc.repo, err)
		}
	}
}

// The token only travels in git's environment, as an HTTP header.
func TestGitTokenInEnvironmentOnly(t *testing.T) {
	env := strings.Join((workspace.Git{Home: "/h", Token: "ghp_secret", Remote: "https://user:pw@forge.example/acme/app.git?x=1"}).Env(), "\n")
	if strings.Contains(env, "ghp_secret") || strings.Contains(env, "pw@") ||
		!strings.Contains(env, "GIT_CONFIG_KEY_1=http.https://forge.example/acme/app.git.extraHeader\n") ||
		!strings.Contains(env, "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hwX3NlY3JldA==") {
		t.Fatalf("env:\n%s", env)
	}
	for _, g := range []workspace.Git{{Home: "/h"}, {Home: "/h", Token: "ghp_secret"}, {Home: "/h", Token: "ghp_secret", Remote: "/srv/git/app.git"}} {
		if env := strings.Join(g.Env(), " "); strings.Contains(env, "extraHeader") || strings.Contains(env, "AUTHORIZATION") {
			t.Fatalf("a token without an http remote of its own is sent: %v", env)
		}
	}
}

// A verifier never runs while a writer holds the workspace; verifiers
// share it.
func TestGateExcludesWriters(t *testing.T) {
	g := manager(t, nil, 0).Gate("k")
	ctx := context.Background()
	releaseWriter, err := g.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Acquire(short, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("a verifier entered while the writer held the gate: %v", err)
	}
	entered := make(chan func())
	go func() {
		release, _ := g.Acquire(ctx, false)
		entered <- release
	}()
	releaseWriter()
	releaseReader := testkit.Recv(t, entered)
	second, err := g.Acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Acquire(short, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("a writer entered while verifiers held the gate: %v", err)
	}
	releaseReader()
	second()
	if release, err := g.Acquire(short, true); err != nil {
		t.Fatalf("free gate: %v", err)
	} else {
		release()
	}
}

func TestFinishedRunDirectoryRemoved(t *testing.T) {
	root := t.TempDir()
	m := workspace.NewManager(root, nil, 0, slog.New(slog.DiscardHandler))
	defer m.Close()
	p, err := m.Paths(workspace.Key("t", "run-1"))
	if err != nil {
		t.Fatal(err)
	}
	m.Finish(workspace.Key("t", "run-1"))
	m.Close() // waits for the removal under way
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Fatalf("kept with --keep-workspaces 0: %v", err)
	}
	// A long retention keeps it; after a restart with a shorter one,
	// Sweep removes what is due.
	long := workspace.NewManager(root, nil, time.Hour, slog.New(slog.DiscardHandler))
	p, _ = long.Paths(workspace.Key("t", "run-2"))
	long.Finish(workspace.Key("t", "run-2"))
	long.Close()
	if _, err := os.Stat(p.Workspace); err != nil {
		t.Fatalf("removed within the retention: %v", err)
	}
	restarted := workspace.NewManager(root, nil, 0, slog.New(slog.DiscardHandler))
	restarted.Sweep()
	restarted.Close()
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Fatalf("not swept: %v", err)
	}
}

// A run's directory is not removed while an execution or a clone holds
// its gate, only once the gate is free.
func TestRemovalWaitsForTheGate(t *testing.T) {
	m := workspace.NewManager(t.TempDir(), nil, 0, slog.New(slog.DiscardHandler))
	key := workspace.Key("t", "run-1")
	p, err := m.Paths(key)
	if err != nil {
		t.Fatal(err)
	}
	release, err := m.Gate(key).Acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	m.Finish(key)
	if _, err := os.Stat(p.Workspace); err != nil {
		t.Fatalf("removed while in use: %v", err)
	}
	release()
	m.Close()
	if _, err := os.Stat(p.Dir); !os.IsNotExist(err) {
		t.Fatalf("kept once free: %v", err)
	}
}

// A run finished before its directory exists is marked all the same, so
// a clone landing there later is still removed (here, or by Sweep after a
// restart).
func TestFinishBeforeTheDirectoryExists(t *testing.T) {
	m := manager(t, nil, time.Hour)
	key := workspace.Key("t", "run-1")
	m.Finish(key)
	p, err := m.Paths(key) // the late clone
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "finished")); err != nil {
		t.Fatalf("not marked: %v", err)
	}
}

// A repository with a tenants list is served to those tenants only, and
// refused to others in the words of an unlisted one.
func TestReposTenants(t *testing.T) {
	r, err := workspace.ParseRepos("r.json", []byte(`{"acme/app":{"url":"/srv/app.git","tenants":["t1","t2"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"t1", "t2"} {
		if err := r.Check(tenant, "acme/app"); err != nil {
			t.Errorf("%s: %v", tenant, err)
		}
	}
	other, unlisted := r.Check("t3", "acme/app"), r.Check("t3", "acme/lib")
	if !errors.Is(other, workspace.ErrNotServed) || strings.ReplaceAll(other.Error(), "app", "lib") != unlisted.Error() {
		t.Fatalf("refusals %v / %v", other, unlisted)
	}
}

// A failed clone's error, which the server logs, carries no credentials
// of the repository URL.
func TestCloneErrorStripsCredentials(t *testing.T) {
	r := repos(t, map[string]workspace.Repo{"acme/app": {URL: "https://oecp:ghp_secret@127.0.0.1:1/acme/app.git"}})
	src := workspace.Source{Repository: "acme/app", Branch: "main", Revision: strings.Repeat("a", 40)}
	err := manager(t, r, time.Hour).Prepare(context.Background(), workspace.Key("t", "run-1"), src, "oecp/run")
	if !errors.Is(err, workspace.ErrUnavailable) || strings.Contains(err.Error(), "ghp_secret") || !strings.Contains(err.Error(), "https://127.0.0.1:1/acme/app.git") {
		t.Fatalf("error: %v", err)
	}
}

// TestGitHomeIsTheServersOwnEmptyDirectory: the home the host's git
// commands share is made under the root, mode 0700; one that holds a file
// (git reads a user excludes file or a .netrc there) or that others may
// write is refused, and the refusal says why.
func TestGitHomeIsTheServersOwnEmptyDirectory(t *testing.T) {
	m := manager(t, nil, time.Hour)
	home, err := m.GitHome()
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(home); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("git's home %s: %v %v", home, info, err)
	}
	planted := filepath.Join(home, ".netrc")
	if err := os.WriteFile(planted, []byte("machine example.com login x password y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GitHome(); err == nil || !strings.Contains(err.Error(), ".netrc") {
		t.Fatalf("a home holding a file: %v", err)
	}
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GitHome(); err == nil || !strings.Contains(err.Error(), "only it may use") {
		t.Fatalf("a home others may write: %v", err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if got, err := m.GitHome(); err != nil || got != home {
		t.Fatalf("the home again: %s %v", got, err)
	}
}
