package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness/sandbox"
)

// endedOnLimit checks that run id's logs name limit and that the server
// ended want executions on it (its log, read whole, counts every run's).
func endedOnLimit(t *testing.T, srv *testServer, s *hostileSetup, id, limit string, want int) {
	t.Helper()
	logs := oecp(t, srv, "run", "logs", id)
	if !strings.Contains(logs.stdout, "it hit its --"+limit+" limit") {
		t.Errorf("%s: no line names the limit:\n%s", id, logs.stdout)
	}
	ended := regexp.MustCompile(`agent execution ended: it hit its limit.* limit=` + limit)
	if n := len(ended.FindAllString(s.log.String(), -1)); n != want {
		t.Errorf("%s: %d executions ended on the limit, want %d:\n%s", id, n, want, s.log.String())
	}
}

// endsOnLimit checks that the server logged inForce as the limits in
// force, that the run of probe mode ends its step and the verifier the
// graph routes the crashed step on to (which does the same) on limit, and
// that a quiet run after it succeeds.
func endsOnLimit(t *testing.T, srv *testServer, s *hostileSetup, inForce, mode, limit string) {
	t.Helper()
	if !strings.Contains(s.log.String(), `"agent limits in force" `+inForce) {
		t.Errorf("the limits in force are not logged:\n%s", s.log.String())
	}
	probes(t, srv, s, mode, mode)
	endedOnLimit(t, srv, s, mode, limit, 2)
	if _, w := probes(t, srv, s, "quiet", "quiet"); w.code != 0 {
		t.Fatalf("a quiet run after it: exit %d\n%s\n%s", w.code, w.stdout, w.stderr)
	}
}

// TestAgentSandboxDefaultLimits: a root server given no limit flag bounds
// every execution by the defaults where its host can enforce them, logs
// the limits in force at start, and a fork storm past the default process
// limit (in threads, which it counts alike) ends its executions crashed,
// naming the limit.
func TestAgentSandboxDefaultLimits(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("the cgroup limits need a root server here")
	}
	for _, l := range []string{sandbox.LimitProcs, sandbox.LimitMemory} {
		if err := sandbox.CanLimit(l); err != nil {
			t.Skipf("this host cannot enforce --%s: %v", l, err)
		}
	}
	s := newHostileSetup(t, 0)
	build := exec.Command("go", "build", "-o", filepath.Join(s.install, "threads"), "./testdata/threads")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := s.start(t, 0)
	endsOnLimit(t, srv, s, "agent-max-procs=4096 agent-max-memory=8G agent-max-disk=10G", "bigstorm", sandbox.LimitProcs)
}

// TestAgentSandboxDiskLimit: with --agent-max-disk 4M, a writer that
// writes 64 MiB into its workspace is killed and its execution ends
// crashed naming the limit, as does the verifier after it (the run's
// workspace is over its bound); a run beside it succeeds.
func TestAgentSandboxDiskLimit(t *testing.T) {
	requireSandbox(t)
	s := newHostileSetup(t, 0)
	srv := s.start(t, 0, "--agent-max-disk", "4M", "--agent-max-procs", "none", "--agent-max-memory", "0")
	endsOnLimit(t, srv, s, "agent-max-procs=none agent-max-memory=none agent-max-disk=4M", "fill", sandbox.LimitDisk)
}

// TestAgentSandboxRunsAProgramDirectlyInTmp: a harness program installed
// directly in /tmp, which every sandbox gets empty, runs in the sandbox
// (it used to end "the stream ended without a result; exit status 127",
// not found inside).
func TestAgentSandboxRunsAProgramDirectlyInTmp(t *testing.T) {
	requireSandbox(t)
	s := newHostileSetup(t, 0)
	f, err := os.CreateTemp("/tmp", "oecp-hostile-agent-*.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	script, err := os.ReadFile(filepath.Join(s.install, "hostile-agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(script); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(f.Name(), 0o755); err != nil {
		t.Fatal(err)
	}
	harness := fmt.Appendf(nil, `{"codex":{"driver":"command","argv":[%q,%q,%q,%q,%q,%q]}}`, f.Name(), s.install, s.data, s.harness, s.homeFile, s.secret)
	if err := os.WriteFile(s.harness, harness, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := s.start(t, 0)
	if _, w := probes(t, srv, s, "tmp", "quiet"); w.code != 0 {
		t.Fatalf("exit %d\n%s\n%s\n%s", w.code, w.stdout, w.stderr, oecp(t, srv, "run", "logs", "tmp").stdout)
	}
}

// TestServeRefusesAHarnessProgramItCannotShow: a harness program inside
// the data directory, which no agent may see, is refused at start with a
// line naming it and why.
func TestServeRefusesAHarnessProgramItCannotShow(t *testing.T) {
	requireSandbox(t)
	s := newHostileSetup(t, os.Geteuid())
	prog := filepath.Join(s.data, "agent.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.harness, fmt.Appendf(nil, `{"codex":{"driver":"command","argv":[%q]}}`, prog), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin, "serve", "--listen", "127.0.0.1:0", "--data", s.data, "--harness", s.harness)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.home}
	out, err := cmd.CombinedOutput()
	want := prog + " is inside " + s.data + ", which the sandbox hides"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
		t.Fatalf("%v\n%s\nwant %q", err, out, want)
	}
}
