package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// The processes of a comparison: each server under comparison, and the
// child runs of `perf load` and `perf idle` that drive them.

// ---------------------------------------------------------------------------
// Server processes.

type serverProc struct {
	target Target
	url    string
	pid    int
	cmd    *exec.Cmd
	done   chan struct{}
	log    string
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// probe does one request/response with the target's template and checks the
// response: matching id, a result, no error.
func probe(u, req string) (resp string, dialErr, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, time.Second)
	c, _, derr := websocket.Dial(dctx, u, nil)
	dcancel()
	if derr != nil {
		return "", derr, nil
	}
	defer c.CloseNow()
	tpl, err := parseTemplate(req)
	if err != nil {
		return "", nil, err
	}
	id := idCounter.Add(1)
	if err := c.Write(ctx, websocket.MessageText, tpl.build(nil, id)); err != nil {
		return "", nil, err
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return "", nil, err
		}
		env, ok := scanEnvelope(b)
		if ok && env.id == nil {
			continue
		}
		switch {
		case !ok:
			return string(b), nil, errors.New("response is not a JSON object")
		case string(env.id) != strconv.FormatInt(id, 10):
			return string(b), nil, fmt.Errorf("response id %s, want %d", env.id, id)
		case env.hasErr || !env.hasRes:
			return string(b), nil, errors.New("response has no result (or has an error)")
		}
		return string(b), nil, nil
	}
}

func startServer(t Target, self, pinCPU, logPath string) (*serverProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ps := strconv.Itoa(port)
	sp := &serverProc{target: t, url: strings.ReplaceAll(t.URL, "{PORT}", ps), done: make(chan struct{}), log: logPath}
	if err := checkLoopbackURL(sp.url); err != nil {
		return nil, err
	}
	if t.Cmd == "" {
		if _, dErr, pErr := probe(sp.url, t.Req); dErr != nil || pErr != nil {
			return nil, fmt.Errorf("%s: external server at %s: %v", t.Name, sp.url, errors.Join(dErr, pErr))
		}
		close(sp.done)
		return sp, nil
	}
	line := strings.ReplaceAll(strings.ReplaceAll(t.Cmd, "{PORT}", ps), "{PERF}", shellQuote(self))
	argv := []string{"sh", "-c", "exec " + line}
	if pinCPU != "" {
		argv = append([]string{"taskset", "-c", pinCPU}, argv...)
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "# %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sp.cmd, sp.pid = cmd, cmd.Process.Pid
	registerProc(sp)
	go func() { cmd.Wait(); close(sp.done) }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-sp.done:
			return nil, fmt.Errorf("%s: server exited during start-up; log %s:\n%s", t.Name, logPath, tailFile(logPath, 2000))
		default:
		}
		resp, dErr, pErr := probe(sp.url, t.Req)
		if dErr == nil && pErr == nil {
			break
		}
		if dErr == nil {
			sp.stop()
			return nil, fmt.Errorf("%s: probe of %s failed: %v; response %q", t.Name, sp.url, pErr, resp)
		}
		if time.Now().After(deadline) {
			sp.stop()
			return nil, fmt.Errorf("%s: not ready after 20s: %v; log %s:\n%s", t.Name, dErr, logPath, tailFile(logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sp, nil
}

// stop ends the server's process group: SIGTERM, then SIGKILL after 5 s.
func (sp *serverProc) stop() {
	if sp.cmd == nil {
		return
	}
	defer unregisterProc(sp)
	select {
	case <-sp.done:
		return
	default:
	}
	syscall.Kill(-sp.pid, syscall.SIGTERM)
	select {
	case <-sp.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-sp.pid, syscall.SIGKILL)
		<-sp.done
	}
}

// Live servers, so that an interrupt still stops them.
var (
	procsMu sync.Mutex
	procs   = map[*serverProc]bool{}
)

func registerProc(sp *serverProc)   { procsMu.Lock(); procs[sp] = true; procsMu.Unlock() }
func unregisterProc(sp *serverProc) { procsMu.Lock(); delete(procs, sp); procsMu.Unlock() }
func stopAllProcs() {
	procsMu.Lock()
	var l []*serverProc
	for sp := range procs {
		l = append(l, sp)
	}
	procsMu.Unlock()
	for _, sp := range l {
		sp.stop()
	}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ---------------------------------------------------------------------------
// Child runs of `perf load` and `perf idle`.

func runChild(ctx context.Context, self, pinCPU string, timeout time.Duration, args []string, out any) error {
	argv := append([]string{self}, args...)
	if pinCPU != "" {
		argv = append([]string{"taskset", "-c", pinCPU}, argv...)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args[:1], " "), err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(stdout.Bytes(), out)
}
