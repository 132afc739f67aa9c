package main

import (
	"bufio"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// serveRefused runs a second `oecp serve` with args and returns its exit
// code and its log once it exits; the test fails at once if it announces
// a URL instead (it started).
func serveRefused(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(oecpBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--shutdown-grace", "100ms"}, args...)...)
	cmd.Env = cliEnv(nil)
	stderr := testkit.StartStderr(t, cmd)
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	url := regexp.MustCompile(`url"?[=:]"?wss?://`)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if url.MatchString(sc.Text()) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("a second server started on the same data directory:\n%s", log.String())
		}
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, log.String()
}

// TestOneDataDirectoryOneServer: a second `oecp serve` on the data
// directory of a running one refuses to start, with any store that keeps
// files there, naming the directory and the running server's pid. With
// PostgreSQL the ledger is shared, but the runs' workspaces in --data
// are not: two servers on one directory would take each other's.
func TestOneDataDirectoryOneServer(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		first := startServer(t, "--store", "sqlite", "--data", dir)
		code, log := serveRefused(t, "--store", "sqlite", "--data", dir)
		wantRefusal(t, code, log, dir, first.cmd.Process.Pid)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn, _ := pgtest.Schema(t)
		dir := t.TempDir()
		first := startServer(t, "--store", "postgres", "--dsn", dsn, "--data", dir)
		code, log := serveRefused(t, "--store", "postgres", "--dsn", dsn, "--data", dir)
		wantRefusal(t, code, log, dir, first.cmd.Process.Pid)
		// Another directory serves the same ledger.
		startServer(t, "--store", "postgres", "--dsn", dsn, "--data", t.TempDir())
	})
}

func wantRefusal(t *testing.T, code int, log, dir string, pid int) {
	t.Helper()
	if code != 2 || !strings.Contains(log, "data directory "+dir+" is in use by another oecp serve (pid "+strconv.Itoa(pid)+")") {
		t.Fatalf("second server exited %d:\n%s", code, log)
	}
}
