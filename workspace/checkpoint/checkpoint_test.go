package checkpoint_test

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
	"github.com/oecp/oecp/workspace"
	"github.com/oecp/oecp/workspace/checkpoint"
)

const (
	key    = "0123456789abcdef/run-a"
	branch = "oecp/run-test"
)

var ctx = context.Background()

// host is one server's run directories over the remote.
type host struct {
	root string
	m    *workspace.Manager
	k    *checkpoint.Keeper
}

func newHost(t *testing.T, r *gittest.Remote, maxBytes int64, push bool) *host {
	t.Helper()
	b, _ := json.Marshal(map[string]workspace.Repo{"acme/app": {URL: r.Dir}})
	repos, err := workspace.ParseRepos("repos.json", b)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	m := workspace.NewManager(root, repos, time.Hour, log)
	t.Cleanup(m.Close)
	return &host{root: root, m: m, k: &checkpoint.Keeper{M: m, MaxBytes: maxBytes, Push: push, Log: log}}
}

func (h *host) path(parts ...string) string {
	return filepath.Join(append([]string{h.root, filepath.FromSlash(key)}, parts...)...)
}

func (h *host) write(t *testing.T, file, content string) {
	t.Helper()
	p := h.path("workspace", file)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *host) read(file string) (string, bool) {
	b, err := os.ReadFile(h.path("workspace", file))
	return string(b), err == nil
}

// gone fails the test when the host keeps any part of a workspace.
func (h *host) gone(t *testing.T, src workspace.Source) {
	t.Helper()
	for _, d := range []string{"workspace", "git", "host.git", "prepared"} {
		if _, err := os.Stat(h.path(d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left behind (%v)", d, err)
		}
	}
	if h.m.Prepared(key, src) {
		t.Error("the manager still holds the workspace")
	}
}

func source(r *gittest.Remote) workspace.Source {
	return workspace.Source{Repository: "acme/app", Branch: "main", Revision: r.Head()}
}

// twoHosts are two hosts of one remote, their checkpoints bounded by
// maxBytes and pushed when push is set: a takes checkpoints, b restores
// them elsewhere.
func twoHosts(t *testing.T, maxBytes int64, push bool) (r *gittest.Remote, a, b *host) {
	t.Helper()
	r = gittest.NewRemote(t)
	return r, newHost(t, r, maxBytes, push), newHost(t, r, maxBytes, push)
}

// worked prepares the host's workspace and does a step's work in it: a
// commit of its own (through the workspace's .git, as an agent would), an
// uncommitted file, a .gitignore and an ignored dependency directory.
func worked(t *testing.T, r *gittest.Remote, h *host) workspace.Source {
	t.Helper()
	src := source(r)
	if err := h.m.Prepare(ctx, key, src, branch); err != nil {
		t.Fatal(err)
	}
	h.write(t, "committed.txt", "by the agent\n")
	r.Git(h.path("workspace"), "add", "committed.txt")
	r.Git(h.path("workspace"), "commit", "--quiet", "-m", "agent commit")
	h.write(t, "one.txt", "step one\n")
	h.write(t, ".gitignore", "node_modules/\n")
	h.write(t, "node_modules/dep.js", "ignored\n")
	return src
}

// checkpointed is twoHosts(t, maxBytes, push) after host a has worked on
// source src and taken the run's first checkpoint, cp.
func checkpointed(t *testing.T, maxBytes int64, push bool) (r *gittest.Remote, a, b *host, src workspace.Source, cp checkpoint.Checkpoint) {
	t.Helper()
	r, a, b = twoHosts(t, maxBytes, push)
	src = worked(t, r, a)
	return r, a, b, src, a.k.Take(ctx, key, src, branch, "run-a/one/1")
}

// TestRestoreElsewhere: a checkpoint taken on one host rebuilds the
// workspace on another: the agent's own commit and its uncommitted work,
// on the run's branch, without the files git ignores.
func TestRestoreElsewhere(t *testing.T) {
	r, _, b, src, cp := checkpointed(t, checkpoint.DefaultMaxBytes, false)
	if cp.Skipped != "" || cp.Commit == src.Revision || len(cp.Bundle) == 0 || cp.Ref != "" {
		t.Fatalf("checkpoint %+v", cp)
	}
	got, err := checkpoint.Decode(cp.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.k.Restore(ctx, key, src, branch, &got); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"committed.txt": "by the agent\n", "one.txt": "step one\n", ".gitignore": "node_modules/\n", "README.md": "# demo\n"} {
		if s, ok := b.read(file); !ok || s != want {
			t.Errorf("%s: %q %v", file, s, ok)
		}
	}
	if _, ok := b.read("node_modules/dep.js"); ok {
		t.Error("an ignored file moved with the checkpoint")
	}
	if head, err := b.m.Head(ctx, key, t.TempDir()); err != nil || head != cp.Commit {
		t.Errorf("the run's branch is at %s (%v), want the checkpoint %s", head, err, cp.Commit)
	}
	// The agents' git directory is at the source revision, the run's work
	// showing as changes.
	if head := r.Git(b.path("workspace"), "rev-parse", "HEAD"); head != src.Revision {
		t.Errorf("the agents' HEAD %s, want the source %s", head, src.Revision)
	}
	if br := r.Git(b.path("workspace"), "symbolic-ref", "--short", "HEAD"); br != branch {
		t.Errorf("on branch %q", br)
	}
	if st := r.Git(b.path("workspace"), "status", "--porcelain"); !strings.Contains(st, "committed.txt") || !strings.Contains(st, "one.txt") {
		t.Errorf("the agents' status does not show the run's work:\n%s", st)
	}
}

// TestRestoreElsewhereAfterTwoSteps: the checkpoint after a second step
// carries the run's whole history since its source revision, the first
// step's work too, and git reads it as a bundle that requires that
// revision alone.
func TestRestoreElsewhereAfterTwoSteps(t *testing.T) {
	r, a, b := twoHosts(t, checkpoint.DefaultMaxBytes, false)
	src := worked(t, r, a)
	first := a.k.Take(ctx, key, src, branch, "run-a/one/1")
	a.write(t, "two.txt", "step two\n")
	cp := a.k.Take(ctx, key, src, branch, "run-a/two/1")
	if cp.Skipped != "" || cp.Commit == first.Commit || len(cp.Bundle) == 0 {
		t.Fatalf("second checkpoint %+v", cp)
	}
	file := filepath.Join(t.TempDir(), "cp.bundle")
	if err := os.WriteFile(file, cp.Bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	if heads := r.Git(r.Dir, "bundle", "list-heads", file); heads != cp.Commit+" "+workspace.CheckpointRef {
		t.Errorf("the bundle's heads: %q", heads)
	}
	if err := b.k.Restore(ctx, key, src, branch, &cp); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"committed.txt": "by the agent\n", "one.txt": "step one\n", "two.txt": "step two\n"} {
		if s, ok := b.read(file); !ok || s != want {
			t.Errorf("%s: %q %v", file, s, ok)
		}
	}
	if head, err := b.m.Head(ctx, key, t.TempDir()); err != nil || head != cp.Commit {
		t.Errorf("the run's branch is at %s (%v), want the checkpoint %s", head, err, cp.Commit)
	}
}

// TestRestoreHereDropsUnfinishedWork: on the host that holds the
// workspace, a restore resets it to the checkpoint: the work of an
// execution that did not end is gone, ignored files stay.
func TestRestoreHereDropsUnfinishedWork(t *testing.T) {
	r := gittest.NewRemote(t)
	a := newHost(t, r, checkpoint.DefaultMaxBytes, false)
	src := worked(t, r, a)
	cp := a.k.Take(ctx, key, src, branch, "run-a/one/1")
	a.write(t, "one.txt", "half rewritten\n")
	a.write(t, "two.txt", "unfinished\n")
	if err := a.k.Restore(ctx, key, src, branch, &cp); err != nil {
		t.Fatal(err)
	}
	if s, _ := a.read("one.txt"); s != "step one\n" {
		t.Errorf("one.txt %q", s)
	}
	if _, ok := a.read("two.txt"); ok {
		t.Error("the unfinished execution's file is still there")
	}
	if _, ok := a.read("node_modules/dep.js"); !ok {
		t.Error("the ignored file was removed")
	}
}

// TestSourceAloneBeforeTheFirstCheckpoint: without a checkpoint the
// workspace is the source revision.
func TestSourceAloneBeforeTheFirstCheckpoint(t *testing.T) {
	r := gittest.NewRemote(t)
	a := newHost(t, r, checkpoint.DefaultMaxBytes, false)
	src := worked(t, r, a)
	if err := a.k.Restore(ctx, key, src, branch, nil); err != nil {
		t.Fatal(err)
	}
	if head, err := a.m.Head(ctx, key, t.TempDir()); err != nil || head != src.Revision {
		t.Errorf("the run's branch is at %s (%v), want the source %s", head, err, src.Revision)
	}
	if head := r.Git(a.path("workspace"), "rev-parse", "HEAD"); head != src.Revision {
		t.Errorf("HEAD %s, want the source %s", head, src.Revision)
	}
	if _, ok := a.read("one.txt"); ok {
		t.Error("work without a checkpoint is still there")
	}
}

// TestOversizedCheckpointIsSkipped: a checkpoint over the limit is not
// kept and says why; the host holding the workspace keeps it as it is,
// another cannot rebuild it and leaves nothing behind.
func TestOversizedCheckpointIsSkipped(t *testing.T) {
	_, a, b, src, cp := checkpointed(t, 16, false)
	if !strings.Contains(cp.Skipped, "over the limit of 16 bytes (--checkpoint-max-bytes)") || len(cp.Bundle) != 0 {
		t.Fatalf("checkpoint %+v", cp)
	}
	got, err := checkpoint.Decode(cp.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.k.Restore(ctx, key, src, branch, &got); err != nil {
		t.Fatalf("on its own host: %v", err)
	}
	if _, ok := a.read("one.txt"); !ok {
		t.Error("its own host lost the workspace")
	}
	err = b.k.Restore(ctx, key, src, branch, &got)
	if !errors.Is(err, checkpoint.ErrSkipped) || !strings.Contains(err.Error(), "--checkpoint-max-bytes") {
		t.Fatalf("elsewhere: %v", err)
	}
	b.gone(t, src)
}

// TestCorruptBundle: a damaged bundle is refused as such, and the
// workspace cloned for it is removed.
func TestCorruptBundle(t *testing.T) {
	_, _, b, src, cp := checkpointed(t, checkpoint.DefaultMaxBytes, false)
	cp.Bundle = cp.Bundle[:len(cp.Bundle)/2]
	if err := b.k.Restore(ctx, key, src, branch, &cp); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("restore of a truncated bundle: %v", err)
	}
	b.gone(t, src)
	if _, err := checkpoint.Decode([]byte("not a checkpoint")); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("decode: %v", err)
	}
}

// TestVanishedSourceRevision: a source revision the repository no longer
// has cannot be rebuilt; nothing is left behind.
func TestVanishedSourceRevision(t *testing.T) {
	r, a, b := twoHosts(t, checkpoint.DefaultMaxBytes, false)
	rev := r.Commit("tmp.txt", "soon gone\n", "temporary")
	r.Push("refs/heads/tmp")
	src := workspace.Source{Repository: "acme/app", Branch: "tmp", Revision: rev}
	if err := a.m.Prepare(ctx, key, src, branch); err != nil {
		t.Fatal(err)
	}
	a.write(t, "one.txt", "step one\n")
	cp := a.k.Take(ctx, key, src, branch, "run-a/one/1")
	r.Git(r.Dir, "update-ref", "-d", "refs/heads/tmp")
	r.Git(r.Dir, "reflog", "expire", "--expire=now", "--all")
	r.Git(r.Dir, "gc", "--quiet", "--prune=now")
	if err := b.k.Restore(ctx, key, src, branch, &cp); !errors.Is(err, checkpoint.ErrRevisionGone) {
		t.Fatalf("restore: %v", err)
	}
	b.gone(t, src)
}

// TestPushedCheckpoint: with Push the checkpoint goes to a hidden ref of
// the remote, and another host rebuilds the workspace from it.
func TestPushedCheckpoint(t *testing.T) {
	r, _, b, src, cp := checkpointed(t, checkpoint.DefaultMaxBytes, true)
	if cp.Skipped != "" || cp.Ref != checkpoint.HiddenRefPrefix+branch || len(cp.Bundle) != 0 {
		t.Fatalf("checkpoint %+v", cp)
	}
	if got := r.Ref(cp.Ref); got != cp.Commit {
		t.Fatalf("remote %s is %q, want %s", cp.Ref, got, cp.Commit)
	}
	if r.Ref("refs/heads/"+branch) != "" {
		t.Fatal("the checkpoint was pushed to a branch")
	}
	got, _ := checkpoint.Decode(cp.Encode())
	if err := b.k.Restore(ctx, key, src, branch, &got); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.read("one.txt"); s != "step one\n" {
		t.Errorf("one.txt %q", s)
	}
}
