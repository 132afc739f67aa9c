package workspace_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/diskusage"
	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/workspace"
)

// hostileRun is a prepared run whose agent is hostile: everything it can
// write (the work tree and the agents' git directory) is its to choose.
type hostileRun struct {
	t      *testing.T
	remote *gittest.Remote
	m      *workspace.Manager
	key    string
	src    workspace.Source
	p      workspace.Paths
	// victim is a directory of the host's that no host program may read
	// into a record, or create, write or delete anything in.
	victim string
	// capture is where a program of the agent's choosing would write,
	// were it ever run.
	capture string
	steal   string
}

var hostileID = workspace.Identity{Name: "oecp", Email: "test@oecp.invalid"}

func newHostileRun(t *testing.T) *hostileRun {
	t.Helper()
	r := gittest.NewRemote(t)
	m := manager(t, repos(t, map[string]workspace.Repo{"acme/app": {URL: r.Dir}}), time.Hour)
	h := &hostileRun{t: t, remote: r, m: m, key: workspace.Key("tenant", "run-h"),
		src: workspace.Source{Repository: "acme/app", Branch: "main", Revision: r.Head()}}
	if err := m.Prepare(context.Background(), h.key, h.src, workspace.Branch("tenant", "run-h")); err != nil {
		t.Fatal(err)
	}
	var err error
	if h.p, err = m.Paths(h.key); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	h.victim, h.capture, h.steal = filepath.Join(base, "victim"), filepath.Join(base, "captured"), filepath.Join(base, "steal.sh")
	if err := os.MkdirAll(h.victim, 0o700); err != nil {
		t.Fatal(err)
	}
	h.writeFile(filepath.Join(h.victim, "shadow"), "root:SECRET-HASH-LINE:19000:0:99999:7:::\n")
	h.writeFile(filepath.Join(h.victim, "tokens"), "alice SECRET-TOKEN-LINE\n")
	h.writeFile(h.steal, "#!/bin/sh\nenv >> "+h.capture+"\ncat "+filepath.Join(h.victim, "shadow")+" >> "+h.capture+"\ncat\n")
	if err := os.Chmod(h.steal, 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *hostileRun) writeFile(path, content string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *hostileRun) link(target, path string) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	_ = os.RemoveAll(path)
	if err := os.Symlink(target, path); err != nil {
		h.t.Fatal(err)
	}
}

// victimState lists the victim directory: every path, its mode, size and
// content.
func (h *hostileRun) victimState() string {
	h.t.Helper()
	var lines []string
	_ = filepath.WalkDir(h.victim, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			lines = append(lines, path+" "+err.Error())
			return nil
		}
		info, _ := d.Info()
		b, _ := os.ReadFile(path)
		lines = append(lines, path+" "+info.Mode().String()+" "+string(b))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// poisonAgentGit writes into the agents' git directory what a hostile
// agent would: a commondir naming a configuration of its own (a clean
// filter, signing with a program of its choice, URL rewrites, an
// fsmonitor, hooks), alternates and reflogs that are links to host files
// and directories, its own refs, packed-refs, HEAD and shallow.
func (h *hostileRun) poisonAgentGit() {
	h.t.Helper()
	g := h.p.Git
	evil := filepath.Join(h.t.TempDir(), "evil")
	h.writeFile(filepath.Join(evil, "config"), "[core]\n\tfsmonitor = "+h.steal+"\n\thooksPath = "+filepath.Join(evil, "hooks")+
		"\n[filter \"steal\"]\n\tclean = "+h.steal+"\n\tsmudge = "+h.steal+"\n\trequired = true\n[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = "+h.steal+
		"\n[url \""+evil+"\"]\n\tinsteadOf = "+h.remote.Dir+"\n\tpushInsteadOf = "+h.remote.Dir+"\n")
	for _, hook := range []string{"pre-commit", "post-commit", "pre-push", "reference-transaction"} {
		h.writeFile(filepath.Join(evil, "hooks", hook), "#!/bin/sh\n"+h.steal+" </dev/null\n")
		_ = os.Chmod(filepath.Join(evil, "hooks", hook), 0o755)
	}
	h.writeFile(filepath.Join(g, "commondir"), evil+"\n")
	h.writeFile(filepath.Join(g, "config"), "[include]\n\tpath = "+filepath.Join(evil, "config")+"\n")
	h.writeFile(filepath.Join(g, "config.worktree"), "[core]\n\tfsmonitor = "+h.steal+"\n")
	h.writeFile(filepath.Join(g, "info", "attributes"), "* filter=steal\n")
	h.link(filepath.Join(h.victim, "tokens"), filepath.Join(g, "objects", "info", "alternates"))
	h.link(filepath.Join(h.victim, "tokens"), filepath.Join(g, "objects", "info", "http-alternates"))
	h.link(h.victim, filepath.Join(g, "logs"))
	h.link(h.victim, filepath.Join(g, "objects", "ab"))
	h.link(h.victim, filepath.Join(g, "info", "exclude"))
	h.writeFile(filepath.Join(g, "packed-refs"), "# pack-refs with: peeled fully-peeled sorted\n"+strings.Repeat("1", 40)+" refs/heads/x\n")
	h.writeFile(filepath.Join(g, "shallow"), h.src.Revision+"\n")
	h.writeFile(filepath.Join(g, "HEAD"), "ref: refs/heads/elsewhere\n")
	if err := syscall.Mkfifo(filepath.Join(g, "index.lock"), 0o644); err != nil {
		h.t.Fatal(err)
	}
	// In the work tree: attributes naming the filter, a link to a host
	// file, a FIFO, and a replaced .git.
	h.writeFile(filepath.Join(h.p.Workspace, ".gitattributes"), "* filter=steal diff=steal\n")
	h.writeFile(filepath.Join(h.p.Workspace, ".gitmodules"), "[submodule \"x\"]\n\tpath = x\n\turl = "+evil+"\n\tupdate = !"+h.steal+"\n")
	h.link(filepath.Join(h.victim, "shadow"), filepath.Join(h.p.Workspace, "shadow-link"))
	if err := syscall.Mkfifo(filepath.Join(h.p.Workspace, "pipe"), 0o644); err != nil {
		h.t.Fatal(err)
	}
	h.writeFile(filepath.Join(h.p.Workspace, "change.txt"), "the agent's work\n")
}

// TestHostGitNeverActsOnAgentGitState: after an agent rewrote every file of
// its git directory (commondir, config, attributes, alternates, reflogs
// and object directories as links to host files, refs, HEAD, shallow, a
// FIFO) and planted attributes, modules, a link and a FIFO in the work
// tree, the host's snapshot runs no program of the agent's, reads,
// creates, writes and deletes nothing of the host's, records the link as
// a link, and commits exactly the work tree on the source revision.
func TestHostGitNeverActsOnAgentGitState(t *testing.T) {
	h := newHostileRun(t)
	h.poisonAgentGit()
	before := h.victimState()
	home := t.TempDir()
	snap, err := h.m.Snapshot(context.Background(), h.key, home, hostileID, "checkpoint", workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(h.capture); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a program of the agent's ran on the host:\n%s", b)
	}
	if after := h.victimState(); after != before {
		t.Fatalf("host files changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if !snap.Changed {
		t.Fatal("the work was not recorded")
	}
	g := h.m.HostGit(h.key, home)
	run := func(args ...string) string {
		out, err := g.Run(context.Background(), args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if parent := run("rev-parse", snap.Commit+"^"); parent != h.src.Revision {
		t.Errorf("the snapshot's parent is %s, want the source %s", parent, h.src.Revision)
	}
	files := run("ls-tree", "-r", "--name-only", snap.Commit)
	want := ".gitattributes\n.gitmodules\nREADME.md\nchange.txt\nshadow-link"
	if files != want {
		t.Errorf("recorded:\n%s\nwant:\n%s", files, want)
	}
	if mode := run("ls-tree", snap.Commit, "shadow-link"); !strings.HasPrefix(mode, "120000 ") {
		t.Errorf("the link is recorded as %q", mode)
	}
	if body := run("cat-file", "-p", snap.Commit+":shadow-link"); body != filepath.Join(h.victim, "shadow") {
		t.Errorf("the link records %q, not its target's name", body)
	}
	if body := run("cat-file", "-p", snap.Commit+":change.txt"); body != "the agent's work" {
		t.Errorf("change.txt recorded as %q", body)
	}
	all := run("log", "--format=%H %s", snap.Commit)
	if strings.Contains(all, strings.Repeat("1", 40)) || strings.Count(all, "\n") != 1 {
		t.Errorf("the run's history is not the source plus the snapshot:\n%s", all)
	}
}

// TestNestedRepositoryIsRefused: a directory of the work tree holding a
// .git (a file naming another repository's mirror, or a directory whose
// commondir does) is never read: the snapshot is refused with the path,
// and records no gitlink; listed in .gitignore it is left out.
func TestNestedRepositoryIsRefused(t *testing.T) {
	other := gittest.NewRemote(t)
	otherCommit := other.Commit("secret.txt", "another tenant's code\n", "other")
	other.Push("refs/heads/main")
	for name, plant := range map[string]func(h *hostileRun){
		"gitfile": func(h *hostileRun) {
			h.writeFile(filepath.Join(h.p.Workspace, "vendor", "lib", ".git"), "gitdir: "+other.Dir+"\n")
		},
		"commondir": func(h *hostileRun) {
			d := filepath.Join(h.p.Workspace, "vendor", "lib", ".git")
			h.writeFile(filepath.Join(d, "commondir"), other.Dir+"\n")
			h.writeFile(filepath.Join(d, "HEAD"), otherCommit+"\n")
		},
		"link": func(h *hostileRun) {
			h.link(other.Dir, filepath.Join(h.p.Workspace, "vendor", "lib", ".git"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHostileRun(t)
			plant(h)
			h.writeFile(filepath.Join(h.p.Workspace, "vendor", "lib", "code.go"), "package lib\n")
			home := t.TempDir()
			_, err := h.m.Snapshot(context.Background(), h.key, home, hostileID, "checkpoint", workspace.Limits{})
			if !errors.Is(err, workspace.ErrNestedRepository) || !strings.Contains(err.Error(), `"vendor/lib"`) {
				t.Fatalf("snapshot: %v", err)
			}
			if head, _ := h.m.Head(context.Background(), h.key, home); head != h.src.Revision {
				t.Fatalf("the run's branch moved to %s", head)
			}
			if _, err := h.m.HostGit(h.key, home).Run(context.Background(), "cat-file", "-e", otherCommit); err == nil {
				t.Fatal("the other repository's commit reached the run's git directory")
			}
			h.writeFile(filepath.Join(h.p.Workspace, ".gitignore"), "vendor/\n")
			snap, err := h.m.Snapshot(context.Background(), h.key, home, hostileID, "checkpoint", workspace.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			files, _ := h.m.HostGit(h.key, home).Run(context.Background(), "ls-tree", "-r", snap.Commit)
			if strings.Contains(files, "vendor") || strings.Contains(files, "160000") {
				t.Fatalf("recorded:\n%s", files)
			}
		})
	}
}

// TestSnapshotBounds: a workspace over the bounds is refused before git
// reads it: a 16 GiB sparse file, more files than allowed.
func TestSnapshotBounds(t *testing.T) {
	h := newHostileRun(t)
	f, err := os.Create(filepath.Join(h.p.Workspace, "sparse.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(16 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	home := t.TempDir()
	_, err = h.m.Snapshot(context.Background(), h.key, home, hostileID, "checkpoint", workspace.Limits{})
	if !errors.Is(err, workspace.ErrTooLarge) || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("a 16 GiB sparse file: %v", err)
	}
	if err := os.Remove(filepath.Join(h.p.Workspace, "sparse.bin")); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		h.writeFile(filepath.Join(h.p.Workspace, "many", strings.Repeat("f", i+1)), "x\n")
	}
	_, err = h.m.Snapshot(context.Background(), h.key, home, hostileID, "checkpoint", workspace.Limits{MaxFiles: 10})
	if !errors.Is(err, workspace.ErrTooLarge) || !strings.Contains(err.Error(), "files") {
		t.Fatalf("too many files: %v", err)
	}
	snap, err := h.m.Snapshot(context.Background(), h.key, home, hostileID, "checkpoint", workspace.Limits{MaxFiles: 30})
	if err != nil || !snap.Changed || snap.Files != 21 {
		t.Fatalf("within the bounds: %+v %v", snap, err)
	}
}

// TestSnapshotRecordsOddNames: names git would have to quote are recorded
// as they are, an unchanged work tree makes no commit, and a removed file
// is removed from the record.
func TestSnapshotRecordsOddNames(t *testing.T) {
	h := newHostileRun(t)
	names := []string{"\"quoted\".txt", "new\nline.txt", "tab\there.txt", "back\\slash.txt", "ünï.txt", " lead space"}
	for _, n := range names {
		h.writeFile(filepath.Join(h.p.Workspace, n), n+"\n")
	}
	if err := os.Chmod(filepath.Join(h.p.Workspace, names[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ctx := context.Background()
	snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, "one", workspace.Limits{})
	if err != nil || !snap.Changed {
		t.Fatalf("%+v %v", snap, err)
	}
	g := h.m.HostGit(h.key, home)
	out, err := g.Run(ctx, "ls-tree", "-r", "-z", snap.Commit)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, rec := range strings.Split(out, "\x00") {
		if meta, name, ok := strings.Cut(rec, "\t"); ok {
			got[name] = strings.Fields(meta)[0]
		}
	}
	for _, n := range names {
		if got[n] == "" {
			t.Errorf("%q is not recorded (%v)", n, got)
		}
	}
	if got[names[0]] != "100755" {
		t.Errorf("the executable file is recorded as %s", got[names[0]])
	}
	again, err := h.m.Snapshot(ctx, h.key, home, hostileID, "two", workspace.Limits{})
	if err != nil || again.Changed || again.Commit != snap.Commit {
		t.Fatalf("an unchanged work tree: %+v %v", again, err)
	}
	if err := os.Remove(filepath.Join(h.p.Workspace, "README.md")); err != nil {
		t.Fatal(err)
	}
	third, err := h.m.Snapshot(ctx, h.key, home, hostileID, "three", workspace.Limits{})
	if err != nil || !third.Changed {
		t.Fatalf("%+v %v", third, err)
	}
	if _, err := g.Run(ctx, "cat-file", "-e", third.Commit+":README.md"); err == nil {
		t.Error("a removed file is still recorded")
	}
}

// TestSnapshotKeepsWithinMaxDisk: a snapshot that could take the run's
// directories past MaxDisk is refused before it writes anything; within
// the bound it is recorded.
func TestSnapshotKeepsWithinMaxDisk(t *testing.T) {
	h := newHostileRun(t)
	ctx := context.Background()
	home := t.TempDir()
	before, err := diskusage.Measure([]string{h.p.Workspace, h.p.Git, h.p.Host}, 1<<40, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.writeFile(filepath.Join(h.p.Workspace, "big.bin"), strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
	hostBefore := h.victimStateOf(h.p.Host)
	_, err = h.m.Snapshot(ctx, h.key, home, hostileID, "one", workspace.Limits{MaxDisk: before + 3<<19})
	if !errors.Is(err, workspace.ErrTooLarge) || !strings.Contains(err.Error(), "--agent-max-disk") {
		t.Fatalf("past the bound: %v", err)
	}
	if after := h.victimStateOf(h.p.Host); after != hostBefore {
		t.Fatal("a refused snapshot wrote into the host git directory")
	}
	if snap, err := h.m.Snapshot(ctx, h.key, home, hostileID, "two", workspace.Limits{MaxDisk: before + 4<<20}); err != nil || !snap.Changed {
		t.Fatalf("within the bound: %+v %v", snap, err)
	}
}

// victimStateOf lists dir's entries, their sizes and modes (no content).
func (h *hostileRun) victimStateOf(dir string) string {
	var lines []string
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil {
			info, _ := d.Info()
			lines = append(lines, path+" "+info.Mode().String()+" "+strconv.FormatInt(info.Size(), 10))
		}
		return nil
	})
	return strings.Join(lines, "\n")
}
