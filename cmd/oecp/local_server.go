package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/oecp/oecp/workspace"
)

// The local server. When nothing chose a client command's server (no
// --server, no OECP_SERVER, no current target) and nothing answers at
// the default address, the run commands, apply and plan start `oecp
// serve` there themselves, in the background: the same binary, on the
// default data directory `oecp serve` uses, listening on loopback only,
// with the agent CLIs found on PATH as its harness, the repositories of
// the user's repos.json plus the checkout the command runs in, and
// --idle-exit, so that it goes away when nobody uses it. It runs in a
// session of its own, detached from the terminal, writing to a log file
// in the data directory; the command waits until it answers, says so in
// one line on stderr, and goes on. Two commands racing to start it each
// start one: the data directory's lock lets one serve, the other exits,
// and both commands use the one that answers. A server chosen by flag,
// environment or target is never started: nothing answering there is an
// error.

// Environment of the local server.
const (
	// localAddrEnv moves the default address (and the local server) to
	// another loopback host:port.
	localAddrEnv = "OECP_LOCAL_ADDR"
	// noAutoServerEnv, when set to anything but "" or "0", turns the
	// local server off, as --no-auto-server does.
	noAutoServerEnv = "OECP_NO_AUTO_SERVER"
	// localIdleEnv overrides localIdleExit (a Go duration).
	localIdleEnv = "OECP_LOCAL_IDLE_EXIT"
)

const (
	// defaultLocalAddr is where the default server URL points.
	defaultLocalAddr = "127.0.0.1:7300"
	// localIdleExit is the --idle-exit of a local server.
	localIdleExit = 15 * time.Minute
	// localStartTimeout bounds the wait for a started local server to
	// answer (opening its ledger and sandbox included).
	localStartTimeout = time.Minute
	// localProbeTimeout bounds one look for a server at the address.
	localProbeTimeout = time.Second
	// localPoll is how often a starting server is asked whether it answers.
	localPoll = 100 * time.Millisecond
	// localLogFile and localDir are the local server's log and generated
	// files in the data directory.
	localLogFile = "local-server.log"
	localDir     = "local-server"
	// localLogMax is the size past which a starting local server begins
	// a new log.
	localLogMax = 8 << 20
	// logTailLines is how much of the log a failed start shows.
	logTailLines = 15
)

// localAddr is the local server's address: OECP_LOCAL_ADDR, else
// defaultLocalAddr.
func localAddr() (string, error) {
	a := os.Getenv(localAddrEnv)
	if a == "" {
		return defaultLocalAddr, nil
	}
	if !isLoopbackListen(a) {
		return "", fmt.Errorf("%s=%q: want a loopback host:port such as 127.0.0.1:7301", localAddrEnv, a)
	}
	return a, nil
}

// localServerURL is the default server URL, at localAddr.
func localServerURL() (string, error) {
	a, err := localAddr()
	if err != nil {
		return "", err
	}
	return "ws://" + a + "/oecp", nil
}

// addAutoServer gives a command --no-auto-server: it may start the local
// server.
func (c *cli) addAutoServer() {
	c.autoServer = true
	c.fs.BoolVar(&c.noAutoServer, "no-auto-server", false, "never start a local server when none answers at the default address (env "+noAutoServerEnv+"=1)")
}

// ensureServer starts the local server when the command may and nothing
// answers at the default address. Any other case is left to the dial. Its
// error is the command's end.
func (c *cli) ensureServer(ctx context.Context) *exitErr {
	err := c.ensureLocal(ctx)
	var x *exitErr
	switch {
	case err == nil:
		return nil
	case errors.As(err, &x):
		return x
	}
	return c.fail(err)
}

func (c *cli) ensureLocal(ctx context.Context) error {
	if err := c.resolveServer(); err != nil || !c.mayStartLocal() {
		return err
	}
	addr, err := localAddr()
	if err != nil || !nothingAt(addr) {
		return nil
	}
	return c.startLocal(ctx, addr)
}

// mayStartLocal reports whether the command may start the local server:
// it is one that does, nothing chose its server, and neither
// --no-auto-server nor OECP_NO_AUTO_SERVER turned it off.
func (c *cli) mayStartLocal() bool {
	off := c.noAutoServer || (os.Getenv(noAutoServerEnv) != "" && os.Getenv(noAutoServerEnv) != "0")
	return c.autoServer && c.isDefaultServer() && !off
}

// connectOrStart is connect, after starting the local server when the
// command may and none answers. A local server that stopped (idle)
// between the look and the dial is started again, once.
func (c *cli) connectOrStart(ctx context.Context) (*client.Conn, client.Dialer, error) {
	if err := c.ensureServer(ctx); err != nil {
		return nil, nil, err
	}
	conn, dial, err := c.connect(ctx)
	if err != nil && c.mayStartLocal() && errors.Is(err, syscall.ECONNREFUSED) {
		if err := c.ensureServer(ctx); err != nil {
			return nil, nil, err
		}
		conn, dial, err = c.connect(ctx)
	}
	return conn, dial, err
}

// nothingAt reports whether a TCP connection to addr is refused: no
// process listens there.
func nothingAt(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, localProbeTimeout)
	if err == nil {
		_ = conn.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// startLocal starts the local server on addr and waits until it answers.
func (c *cli) startLocal(ctx context.Context, addr string) error {
	data, err := sqlite.DefaultDir()
	if err != nil {
		return &localError{fmt.Errorf("no local server: %w", err)}
	}
	if err := os.MkdirAll(filepath.Join(data, localDir), 0o700); err != nil {
		return &localError{fmt.Errorf("no local server: data directory: %w", err)}
	}
	args, agents, err := c.localServeArgs(data, addr)
	if err != nil {
		return &localError{fmt.Errorf("no local server: %w", err)}
	}
	logPath := filepath.Join(data, localLogFile)
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > localLogMax {
		_ = os.Rename(logPath, logPath+".1") // one older log is kept
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return &localError{fmt.Errorf("no local server: %w", err)}
	}
	defer logf.Close()
	st, _ := logf.Stat()
	exe, err := os.Executable()
	if err != nil {
		return &localError{fmt.Errorf("no local server: %w", err)}
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = logf, logf, data
	detach(cmd)
	if err := cmd.Start(); err != nil {
		return &localError{fmt.Errorf("no local server: start %s: %w", exe, err)}
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	mine, err := c.waitLocal(ctx, localStart{addr: addr, data: data, logPath: logPath, logOffset: st.Size(), pid: cmd.Process.Pid, exited: exited})
	if err != nil {
		tail := logTail(logPath, st.Size())
		return c.usageErr("the local server did not start: %v", err).hint("Its log (" + logPath + "):\n" + tail).
			hint("Start a server yourself (oecp serve --harness FILE, see oecp help serve), or give --server.")
	}
	if mine {
		fmt.Fprintf(c.stderr, "oecp %s: started a local server at %s (data: %s, log: %s; harness: %s; it stops after %s without use)\n",
			c.name, c.server, data, logPath, agents, shortDuration(localIdle()))
	}
	return nil
}

// localStart is one start of the local server: the process started, where
// it logs, and what of the log was there before.
type localStart struct {
	addr, data, logPath string
	logOffset           int64
	pid                 int
	exited              <-chan struct{}
}

// wait waits until an oecp server answers at the address: the one
// started (mine: it holds the data directory's lock), or the one that won
// a race to start it. The started one exiting is an error unless another
// holds the data directory or the address: then that one is waited for.
func (c *cli) waitLocal(ctx context.Context, l localStart) (mine bool, err error) {
	deadline := time.NewTimer(localStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(localPoll)
	defer tick.Stop()
	exited := l.exited
	for {
		if oecpAt(l.addr) != "" {
			return lockPID(filepath.Join(l.data, dataLockFile)) == l.pid, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, fmt.Errorf("nothing answered at %s within %v", l.addr, localStartTimeout)
		case <-exited:
			if !strings.Contains(logTail(l.logPath, l.logOffset), "in use") {
				return false, errors.New("it exited")
			}
			fmt.Fprintf(c.stderr, "oecp %s: another oecp serve holds %s or %s (pid %d); waiting for it to answer there\n",
				c.name, l.data, l.addr, lockPID(filepath.Join(l.data, dataLockFile)))
			exited = nil
		case <-tick.C:
		}
	}
}

// shortDuration is d as a flag takes it, without zero units: 15m, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// localIdle is the local server's --idle-exit.
func localIdle() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(localIdleEnv)); err == nil && d > 0 {
		return d
	}
	return localIdleExit
}

// localServeArgs are the arguments of the local server's `oecp serve`,
// and what its harness holds, for the started line.
func (c *cli) localServeArgs(data, addr string) ([]string, string, error) {
	args := []string{"serve", "--listen", addr, "--idle-exit", localIdle().String()}
	harnessFile, agents, err := writeLocalHarness(filepath.Join(data, localDir))
	if err != nil {
		return nil, "", err
	}
	if harnessFile != "" {
		args = append(args, "--harness", harnessFile)
	}
	repos, err := c.writeLocalRepos(filepath.Join(data, localDir))
	if err != nil {
		return nil, "", err
	}
	if repos != "" {
		args = append(args, "--repos", repos)
	}
	return args, agents, nil
}

// writeLocalHarness writes the harness file of the agent CLIs on PATH
// (codex, claude) in dir; "" when there is none, so that runs are
// refused with the server's own reason.
func writeLocalHarness(dir string) (file, agents string, err error) {
	h := map[string]any{}
	var found []string
	for _, name := range []string{"codex", "claude"} {
		if _, err := exec.LookPath(name); err == nil {
			h[name] = map[string]any{"env": []string{harnessDefaults[name].env}}
			found = append(found, name)
		}
	}
	if len(found) == 0 {
		return "", "none (no codex or claude on PATH)", nil
	}
	file = filepath.Join(dir, "harness.json")
	b, _ := json.Marshal(h)
	return file, strings.Join(found, ", "), writeFileAtomic(file, b)
}

// userReposPath is the user's repository file, which the local server
// serves: repos.json beside config.yaml.
func userReposPath() (string, error) {
	p, err := configPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "repos.json"), nil
}

// writeLocalRepos writes the local server's repository file in dir: the
// repositories the previous local server served, the user's repos.json
// over them, and the repository of the git checkout the command runs in
// (its origin) when neither lists it. "" when there is nothing to serve.
func (c *cli) writeLocalRepos(dir string) (string, error) {
	file := filepath.Join(dir, "repos.json")
	m := map[string]json.RawMessage{}
	if b, err := os.ReadFile(file); err == nil {
		if _, err := workspace.ParseRepos(file, b); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	user, err := userReposPath()
	if err == nil {
		b, err := os.ReadFile(user)
		switch {
		case err == nil:
			if _, err := workspace.ParseRepos(user, b); err != nil {
				return "", err
			}
			_ = json.Unmarshal(b, &m)
		case !errors.Is(err, os.ErrNotExist):
			return "", err
		}
	}
	if repo, entry, ok := checkoutRepo(); ok {
		if _, listed := m[repo]; !listed {
			m[repo], _ = json.Marshal(entry)
		}
	}
	if len(m) == 0 {
		return "", nil
	}
	b, _ := json.Marshal(m)
	if _, err := workspace.ParseRepos(file, b); err != nil {
		return "", err
	}
	return file, writeFileAtomic(file, b)
}

// checkoutRepo is the repository of the git checkout of the current
// directory, as a repos.json entry: its origin's URL (a relative path made
// absolute), and a token from GH_TOKEN or GITHUB_TOKEN when one is set
// and origin is https.
func checkoutRepo() (string, workspace.Repo, bool) {
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err
	}
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return "", workspace.Repo{}, false
	}
	origin, err := git("-C", top, "remote", "get-url", "origin")
	if err != nil {
		return "", workspace.Repo{}, false
	}
	repo, ok := repoFromURL(origin)
	if !ok {
		return "", workspace.Repo{}, false
	}
	entry := workspace.Repo{URL: origin}
	if u, err := url.Parse(origin); err == nil && u.Scheme == "" && !strings.Contains(origin, ":") && !filepath.IsAbs(origin) {
		entry.URL = filepath.Join(top, origin)
	}
	if strings.HasPrefix(origin, "https://") {
		for _, v := range []string{"GH_TOKEN", "GITHUB_TOKEN"} {
			if os.Getenv(v) != "" {
				entry.TokenEnv = v
				break
			}
		}
	}
	return repo, entry, true
}

// writeFileAtomic writes data to path through a temporary file renamed
// over it, readable by the user alone: two commands starting the local
// server at once never read each other's half-written file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return err
}

// logTail is the last lines of the log at path written after offset.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (unreadable: " + err.Error() + ")"
	}
	if offset < int64(len(b)) {
		b = b[offset:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// localHint adds to a run submission refused at the default address for
// a repository or a harness the server lacks that a local server knows
// only what it was started with, and how to start it anew.
func (c *cli) localHint(e *client.Error) string {
	var reason string
	e.Detail("reason", &reason)
	if !c.isDefaultServer() || e.DataCode != protocol.GraphInvalid ||
		!(strings.HasPrefix(reason, unservedPrefix) || hostRefusal(reason)) {
		return ""
	}
	data, err := sqlite.DefaultDir()
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(data, localDir)); err != nil {
		return "" // no local server was ever started here
	}
	holder := "it"
	if pid := lockPID(filepath.Join(data, dataLockFile)); pid != 0 {
		holder = fmt.Sprintf("it (kill %d)", pid)
	}
	return fmt.Sprintf("A local server serves the repositories and agent CLIs it found when it started (%s):\n  stop %s and run this again to start one for the checkout here and the CLIs on PATH now.",
		filepath.Join(data, localDir), holder)
}

// lockPID is the pid a data directory's lock file names (0: none): the
// server holding it while one does.
func lockPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}
