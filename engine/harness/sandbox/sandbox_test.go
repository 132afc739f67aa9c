package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oecp/oecp/engine/worker"
)

func TestParseUIDRange(t *testing.T) {
	r, err := ParseUIDRange("3000-3009")
	if err != nil || r != (UIDRange{From: 3000, To: 3009}) {
		t.Fatalf("%v %v", r, err)
	}
	for _, bad := range []string{"", "3000", "0-10", "10-9", "a-b", "1-4294967295", "-5"} {
		if _, err := ParseUIDRange(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Two lease sets on one lease directory (two servers on one host) never
// hand out the same UID; a released UID can be leased again.
func TestLeasesAreHostWide(t *testing.T) {
	dir := t.TempDir()
	r := UIDRange{From: 2101000000, To: 2101000001}
	a, err := newLeases(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newLeases(r, dir)
	la, err := a.acquire()
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.acquire()
	if err != nil {
		t.Fatal(err)
	}
	// b's lease must stay open (a lease dropped by the garbage collector
	// closes its file, and its flock with it).
	defer runtime.KeepAlive(lb)
	if la.uid == lb.uid {
		t.Fatalf("both servers leased %d", la.uid)
	}
	if l, err := a.acquire(); err == nil {
		t.Fatalf("a third lease %d out of a range of two", l.uid)
	}
	if err := la.release(); err != nil {
		t.Fatal(err)
	}
	lc, err := b.acquire()
	if err != nil || lc.uid != la.uid {
		t.Fatalf("released UID %d not leased again: %v %v", la.uid, lc, err)
	}
}

// A UID that still owns a process is never leased; releasing a lease kills
// every process of its UID.
func TestLeaseSkipsBusyUIDsAndKillsOnRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting processes under other UIDs needs root")
	}
	r := UIDRange{From: 2101000100, To: 2101000101}
	busy := sleepAs(t, r.From)
	l, err := mustLeases(t, r).acquire()
	if err != nil {
		t.Fatal(err)
	}
	if l.uid != r.To {
		t.Fatalf("leased %d, which a process owns", l.uid)
	}
	victim := sleepAs(t, l.uid)
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	if err := victim.Wait(); err == nil {
		t.Fatal("a process of the released UID exited cleanly instead of being killed")
	}
	_ = busy.Process.Kill()
	_ = busy.Wait()
}

func mustLeases(t *testing.T, r UIDRange) *leases {
	l, err := newLeases(r, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func sleepAs(t *testing.T, uid uint32) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd
}

// A CLI installed under the hidden home is shown as its whole npm prefix;
// an installation that holds a hidden directory is not shown.
func TestExposedPaths(t *testing.T) {
	home := t.TempDir()
	prefix := filepath.Join(home, ".cache", "clis", "codex-1")
	pkg := filepath.Join(prefix, "node_modules", "@openai", "codex", "bin")
	bin := filepath.Join(prefix, "node_modules", ".bin")
	data := filepath.Join(home, "data")
	for _, d := range []string{pkg, bin, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pkg, "codex.js"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../@openai/codex/bin/codex.js", filepath.Join(bin, "codex")); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(home, "notes")
	_ = os.WriteFile(notes, nil, 0o644)
	dirs, _, explicit := hiddenPaths([]string{home, data})
	got := exposedPaths(dirs, explicit, []string{filepath.Join(bin, "codex"), notes, "/bin/sh"})
	if !slices.Equal(got, []string{prefix}) {
		t.Fatalf("exposed %v, want [%s]", got, prefix)
	}
}

// In a sandbox a writer writes its workspace and sees only its own
// processes; a verifier, even one that runs first, reads the workspace
// but cannot write it; the hidden directory is empty, also when its name
// is a link.
func TestConfinedWriterAndVerifier(t *testing.T) {
	// The data directory is named through a link, as /var/run names /run.
	base := t.TempDir()
	data := filepath.Join(base, "data")
	if err := os.Mkdir(filepath.Join(base, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", data); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(data, "runs", "r", "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "ledger"), []byte("tenants"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := requireHost(t, Config{Hide: []string{data}})
	defer h.CloseRun("r")
	script := `ls "$PWD" >/dev/null && echo canread; echo w > "$PWD/by-$ROLE" && echo wrote; ls /proc | grep -c '^[0-9]'; cat ` + filepath.Join(data, "ledger") + ` || echo noledger`
	for _, tc := range []struct {
		verifier bool
		role     string
		want     []string
	}{{true, "verifier", []string{"canread", "noledger"}}, {false, "writer", []string{"canread", "wrote", "noledger"}}} {
		e, err := h.Start(Spec{Run: "r", Workspace: ws, Verifier: tc.verifier})
		if err != nil {
			t.Fatal(err)
		}
		res := worker.Process{Argv: []string{"/bin/sh", "-c", script}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin", "ROLE=" + tc.role},
			MaxStdout: 1 << 16, Confine: e.Confine}.Run(context.Background())
		e.Close()
		lines := strings.Fields(string(res.Stdout))
		for _, w := range tc.want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s: %q missing from %q", tc.role, w, lines)
			}
		}
		if tc.verifier && slices.Contains(lines, "wrote") {
			t.Errorf("the verifier wrote its workspace")
		}
		if len(lines) < 2 || len(lines[len(lines)-2]) > 1 {
			t.Errorf("%s sees more than a handful of processes: %q", tc.role, lines)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "by-verifier")); err == nil {
		t.Error("by-verifier exists")
	}
	if _, err := os.Stat(filepath.Join(ws, "by-writer")); err != nil {
		t.Error("the writer's file is missing")
	}
}

// On a root server a confined process runs as its execution's leased UID
// with no other group, no capability and no_new_privs, and a descriptor
// the server holds without close-on-exec does not reach it.
func TestConfinedProcessHasItsLeasedIdentityAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("UIDs are leased by a root server")
	}
	e, ws := startWriter(t)
	// A descriptor without close-on-exec, as a careless launcher leaves.
	leaked, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leaked)
	script := `test -e /proc/self/fd/` + strconv.Itoa(leaked) + ` && echo leaked; cat /proc/self/status`
	res := worker.Process{Argv: []string{"/bin/sh", "-c", script}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
		MaxStdout: 1 << 16, Confine: e.Confine}.Run(context.Background())
	if strings.HasPrefix(string(res.Stdout), "leaked\n") {
		t.Errorf("descriptor %d of the server is open in the sandbox", leaked)
	}
	if e.uid <= 0 {
		t.Fatalf("a root server's execution has UID %d", e.uid)
	}
	checkIdentity(t, string(res.Stdout), e.uid)
}

// checkIdentity checks a process's /proc/PID/status: uid is its every
// user and group ID, it has no other group, no capability in any set, and
// no_new_privs.
func checkIdentity(t *testing.T, status string, uid int) {
	t.Helper()
	id := strconv.Itoa(uid)
	want := map[string]string{
		"Uid:": id + " " + id + " " + id + " " + id, "Gid:": id + " " + id + " " + id + " " + id, "Groups:": "",
		"CapInh:": "0000000000000000", "CapPrm:": "0000000000000000", "CapEff:": "0000000000000000",
		"CapBnd:": "0000000000000000", "CapAmb:": "0000000000000000", "NoNewPrivs:": "1",
	}
	for line := range strings.Lines(status) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if w, ok := want[f[0]]; ok {
			if got := strings.Join(f[1:], " "); got != w {
				t.Errorf("%s %q, want %q", f[0], got, w)
			}
			delete(want, f[0])
		}
	}
	for k := range want {
		t.Errorf("%s missing from the process's status", k)
	}
}

// TestConfinedProcessSeesItsOwnAccounts: the sandbox's passwd and group
// name the execution's user, its system git configuration trusts every
// repository, all three are read-only inside, and a second process of
// the same execution (each process gets its own copies) sees them too.
func TestConfinedProcessSeesItsOwnAccounts(t *testing.T) {
	e, ws := startWriter(t)
	uid := e.uid
	if uid < 0 {
		uid = os.Getuid()
	}
	script := `id -un; id -gn; git config --system safe.directory; ls -l /etc/passwd | cut -c1-10; ` +
		`echo x >> /etc/passwd 2>/dev/null && echo wrote; echo x >> /etc/gitconfig 2>/dev/null && echo wrote; true`
	want := []string{"root", "root", "*", "-r--r--r--"}
	if uid != 0 {
		want = []string{agentName, agentName, "*", "-r--r--r--"}
	}
	for range 2 {
		res := worker.Process{Argv: []string{"/bin/sh", "-c", script}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
			MaxStdout: 1 << 16, Confine: e.Confine}.Run(context.Background())
		if got := strings.Fields(string(res.Stdout)); !slices.Equal(got, want) {
			t.Fatalf("inside the sandbox: %q (%v %v), want %q", got, res.StartErr, res.Exit, want)
		}
	}
}

// startWriter starts the execution of run "r"'s writer on a new host, in
// a workspace of its own, and returns it and the workspace; both end
// with the test.
func startWriter(t *testing.T) (*Execution, string) {
	ws := filepath.Join(t.TempDir(), "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	h := requireHost(t, Config{})
	t.Cleanup(func() { h.CloseRun("r") })
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, ws
}
