package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type sink struct {
	mu   sync.Mutex
	logs []string
	outs []string
}

func (s *sink) sinks() worker.Sinks {
	return worker.Sinks{
		Log:    func(_, m string) { s.mu.Lock(); s.logs = append(s.logs, m); s.mu.Unlock() },
		Output: func(m string) { s.mu.Lock(); s.outs = append(s.outs, m); s.mu.Unlock() },
	}
}

func outcomeJSON(t *testing.T, o worker.Outcome) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuiltins(t *testing.T) {
	reg := worker.NewRegistry()
	run := func(ref, input string) string {
		w, ok := reg.Lookup(ref)
		if !ok {
			t.Fatalf("%s missing", ref)
		}
		return outcomeJSON(t, w.Run(context.Background(), worker.Execution{Input: json.RawMessage(input)}))
	}
	cases := []struct{ ref, in, want string }{
		{worker.BuiltinEcho, `{"b":1,"a":[true]}`, `{"status":"verified","output":{"a":[true],"b":1},"artifacts":[]}`},
		{worker.BuiltinFail, `null`, `{"status":"error","code":"crash","reason":"declared_failure"}`},
		{worker.BuiltinSleep, `{"ms":0}`, `{"status":"verified","output":null,"artifacts":[]}`},
		{worker.BuiltinSleep, `{"ms":"x"}`, `{"status":"error","code":"malformed","reason":"malformed_result"}`},
		{worker.BuiltinApprove, `null`, `{"status":"verifier","output":null,"signals":{"verdict":"approved"},"diagnostic":null,"artifacts":[]}`},
		{worker.BuiltinReject, `{}`, `{"status":"verifier","output":null,"signals":{"verdict":"rejected"},"diagnostic":null,"artifacts":[]}`},
	}
	for _, c := range cases {
		if got := run(c.ref, c.in); got != c.want {
			t.Errorf("%s(%s) = %s, want %s", c.ref, c.in, got, c.want)
		}
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	w, _ := worker.NewRegistry().Lookup(worker.BuiltinSleep)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := w.Run(ctx, worker.Execution{Input: json.RawMessage(`{"ms":3600000}`)})
	if o.Code != worker.CodeTimeout {
		t.Fatalf("got %+v", o)
	}
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "w.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const recA = `{"kind":"record","fields":{"a":{"required":true,"type":{"kind":"integer"}}}}`

var inputType = `{"kind":"null"}`

func command(t *testing.T, kind, output, body string, extra string) *worker.Command {
	t.Helper()
	spec := `[{"worker":"test.w@1","kind":"` + kind + `","input":` + inputType + `,"output":` + output + `,"argv":["` + script(t, body) + `"]` + extra + `}]`
	specs, err := worker.ParseCommandSpecs([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	return worker.NewCommand(specs[0])
}

func TestCommandWorkerOutput(t *testing.T) {
	c := command(t, "step", recA, `read x; echo "got input" >&2; printf '%s' "$x"`, "")
	s := &sink{}
	o := c.Run(context.Background(), worker.Execution{Input: json.RawMessage(`{"a":1}`), Sinks: s.sinks()})
	if got := outcomeJSON(t, o); got != `{"status":"verified","output":{"a":1},"artifacts":[]}` {
		t.Fatalf("got %s", got)
	}
	if len(s.logs) != 1 || s.logs[0] != "got input" || len(s.outs) != 1 {
		t.Fatalf("logs %q outs %q", s.logs, s.outs)
	}
}

func TestCommandWorkerMalformedOutput(t *testing.T) {
	for name, c := range map[string]*worker.Command{
		"not json":      command(t, "step", `{"kind":"null"}`, `echo 'nope {'`, ""),
		"ill-typed":     command(t, "step", `{"kind":"null"}`, `echo '{"a":1}'`, ""),
		"over the cap":  command(t, "step", `{"kind":"string"}`, `printf '"%s"' 0123456789012345678901234567890123456789`, `,"maxOutputBytes":8`),
		"missing label": command(t, "verifier", `{"kind":"null"}`, `echo '{"output":null,"signals":{},"diagnostic":null}'`, `,"signals":{"verdict":["ok","bad"]}`),
		"unknown label": command(t, "verifier", `{"kind":"null"}`, `echo '{"output":null,"signals":{"verdict":"maybe"},"diagnostic":null}'`, `,"signals":{"verdict":["ok","bad"]}`),
	} {
		o := c.Run(context.Background(), worker.Execution{Input: json.RawMessage(`null`)})
		if o.Code != worker.CodeMalformed || o.Reason != worker.ReasonMalformedResult {
			t.Errorf("%s: got %+v", name, o)
		}
	}
	v := command(t, "verifier", `{"kind":"null"}`, `echo '{"output":null,"signals":{"verdict":"ok"},"diagnostic":null}'`, `,"signals":{"verdict":["ok","bad"]}`)
	if got := outcomeJSON(t, v.Run(context.Background(), worker.Execution{Input: json.RawMessage(`null`)})); got != `{"status":"verifier","output":null,"signals":{"verdict":"ok"},"diagnostic":null,"artifacts":[]}` {
		t.Fatalf("verifier: %s", got)
	}
}

func TestCommandWorkerNonZeroExitIsCrash(t *testing.T) {
	c := command(t, "step", `{"kind":"null"}`, `echo null ; exit 3`, "")
	if o := c.Run(context.Background(), worker.Execution{Input: json.RawMessage(`null`)}); o.Code != worker.CodeCrash {
		t.Fatalf("got %+v", o)
	}
}

// TestCommandWorkerTimeoutKillsProcessGroup: on timeout the whole process
// group is killed, children included.
func TestCommandWorkerTimeoutKillsProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	c := command(t, "step", `{"kind":"null"}`, `sleep 3600 & echo $! > `+pidFile+`; echo started >&2; wait`, "")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 1)
	sinks := worker.Sinks{Log: func(_, m string) {
		if m == "started" {
			started <- struct{}{}
		}
	}}
	done := make(chan worker.Outcome)
	go func() { done <- c.Run(ctx, worker.Execution{Input: json.RawMessage(`null`), Sinks: sinks}) }()
	testkit.Recv(t, started)
	cancel()
	o := testkit.Recv(t, done)
	if o.Code != worker.CodeTimeout {
		t.Fatalf("got %+v", o)
	}
	waitGone(t, pidFile)
}

func TestStderrLinesAreSanitisedAndBounded(t *testing.T) {
	c := command(t, "step", `{"kind":"null"}`, `printf 'tab\there\033[31m\n' >&2; head -c 20000 /dev/zero | tr '\0' x >&2; echo >&2; echo null`, "")
	s := &sink{}
	c.Run(context.Background(), worker.Execution{Input: json.RawMessage(`null`), Sinks: s.sinks()})
	if len(s.logs) != 2 || s.logs[0] != `tab\there\u001b[31m` || s.logs[1] != protocol.RedactedLogMessage || s.outs[1] != protocol.RedactedAttachOutput {
		t.Fatalf("logs %q", s.logs)
	}
}

func TestWorkersFileValidation(t *testing.T) {
	bad := []string{
		`{}`,
		`[{"worker":"nover","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"]}]`,
		`[{"worker":"a@1","kind":"job","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"]}]`,
		`[{"worker":"a@1","kind":"step","input":{"kind":"regex"},"output":{"kind":"null"},"argv":["x"]}]`,
		`[{"worker":"a@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":[]}]`,
		`[{"worker":"a@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"],"env":["A=B"]}]`,
		`[{"worker":"a@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"],"secret":"s"}]`,
		`[{"worker":"a@1","kind":"verifier","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"]}]`,
		`[{"worker":"builtin.echo@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"]}]`,
		`[{"worker":"a@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"]},{"worker":"a@1","kind":"step","input":{"kind":"null"},"output":{"kind":"null"},"argv":["x"]}]`,
	}
	for _, b := range bad {
		if _, err := worker.ParseCommandSpecs([]byte(b)); !errors.Is(err, worker.ErrInvalidWorkers) {
			t.Errorf("%s: err %v", b, err)
		}
	}
}

// TestBackgroundChildDoesNotHoldTheStep: a worker that answers at once but
// leaves a background child holding its stdout settles when it exits, not
// at its timeout (the context here never ends), and the child is killed
// with its group.
func TestBackgroundChildDoesNotHoldTheStep(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	c := command(t, "step", `{"kind":"null"}`, `sleep 1001 & echo $! > `+pidFile+`; echo null`, "")
	o := c.Run(context.Background(), worker.Execution{Input: json.RawMessage(`null`)})
	if got := outcomeJSON(t, o); got != `{"status":"verified","output":null,"artifacts":[]}` {
		t.Fatalf("got %s", got)
	}
	waitGone(t, pidFile)
}

// TestOutputOverTheLimitKillsAtOnce: a worker that writes past its output
// bound and keeps running is killed at the bound and settles malformed,
// without waiting for its timeout (the context here never ends).
func TestOutputOverTheLimitKillsAtOnce(t *testing.T) {
	c := command(t, "step", `{"kind":"string"}`, `while :; do printf xxxxxxxxxxxxxxxx; done`, `,"maxOutputBytes":64`)
	o := c.Run(context.Background(), worker.Execution{Input: json.RawMessage(`null`)})
	if o.Code != worker.CodeMalformed || o.Reason != worker.ReasonMalformedResult {
		t.Fatalf("got %+v", o)
	}
}

// waitGone waits until the pid written in pidFile no longer runs (gone,
// or a zombie about to be reaped by init). There is no event to wait on
// for another process's reaping, so it polls; it asserts no duration.
func waitGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	for {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if strings.Contains(string(stat), ") Z ") {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestProcessLinesStreamStdout: with Lines set, stdout arrives line by
// line with its newline, a last unterminated line at the end, and the
// total stays bounded by MaxStdout.
func TestProcessLinesStreamStdout(t *testing.T) {
	var got []string
	res := worker.Process{
		Argv:      []string{"/bin/sh", "-c", `printf 'one\ntwo\n'; printf 'thr'; printf 'ee'`},
		MaxStdout: 64,
		Lines:     func(l []byte) { got = append(got, string(l)) },
	}.Run(context.Background())
	if res.Exit != nil || res.Overflow || len(res.Stdout) != 0 || strings.Join(got, "|") != "one\n|two\n|three" {
		t.Fatalf("lines %q, result %+v", got, res)
	}
	got = nil
	res = worker.Process{
		Argv:      []string{"/bin/sh", "-c", `while :; do echo xxxxxxxxxxxxxxx; done`},
		MaxStdout: 64,
		Lines:     func(l []byte) { got = append(got, string(l)) },
	}.Run(context.Background())
	if !res.Overflow || len(strings.Join(got, "")) > 64 {
		t.Fatalf("overflow %v after %d bytes", res.Overflow, len(strings.Join(got, "")))
	}
}
