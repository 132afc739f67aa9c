package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"
	"unicode"

	"github.com/oecp/oecp/engine/worker"
)

// Limits of the command driver.
const (
	// MaxStdoutBytes bounds one turn's stdout under the command driver,
	// which holds it whole; more is a driver error.
	MaxStdoutBytes = 8 << 20
	// MaxStreamBytes bounds the event stream of one CLI process (Codex,
	// Claude Code), which is read a line at a time and never held whole:
	// a long honest session with large tool outputs streams tens of MiB.
	// One line may be as long as the whole cap; more is a driver error.
	MaxStreamBytes = 64 << 20
	// maxSessionBytes bounds a session id.
	maxSessionBytes = 512
)

// ErrDriver wraps every turn failure that is not the caller's context
// ending: the process could not start, exited non-zero, answered something
// other than the reply shape, exceeded the stdout cap, or changed session.
var ErrDriver = errors.New("harness driver failed")

// ErrProviderAuth wraps a turn the provider refused for its credential
// (HTTP 401 or 403); the driver stops the CLI at the first report instead
// of waiting out its own retries.
var ErrProviderAuth = errors.New("the provider refused the credential")

// Turn is one prompt sent to a harness session.
type Turn struct {
	// Dir is the execution's working directory; the process runs there.
	Dir string
	// Node is the graph node name, for the harness's own records.
	Node string
	// Model and Effort come from the node's binding; Effort may be "".
	Model  string
	Effort string
	// Session is "" to start a new session, or the id a previous turn
	// returned to resume it.
	Session string
	// Resume is set when the turn continues an earlier conversation: a
	// correction, or a later execution of a node_instance session. A
	// driver that cannot continue without a session id then fails instead
	// of starting afresh.
	Resume bool
	// Prompt is the full text of the turn.
	Prompt string
	// Env names the server environment variables the process gets. A
	// driver refuses (ErrEnvNotAllowed) a name its harness entry does not
	// list; a listed name that is unset is simply absent.
	Env []string
	// Verifier is set for a verifier node: it may read the workspace but
	// must not change it.
	Verifier bool
	// Provider is the runtime plan's provider (openai, openrouter,
	// anthropic).
	Provider string
	// Home is the session's private directory (mode 0700), the process's
	// HOME and its CLI's configuration directory; "" when the runner has
	// no runtime directory.
	Home string
	// Started, when set, is called with the process group id of the
	// turn's process once it runs.
	Started func(pgid int)
	// ThreadUsage is the session's cumulative usage before this turn, for
	// a harness that reports usage cumulatively per session (Codex).
	ThreadUsage Usage
	// Confine, when set, confines the turn's process (worker.Process's
	// Confine).
	Confine func(cmd *exec.Cmd) (start func() error, cleanup func(), err error)
	// Tap, when set, receives the turn's processes' raw evidence.
	Tap worker.Tap
}

// Reply is a successful turn's answer.
type Reply struct {
	// Session identifies the session; pass it back to resume.
	Session string
	// Text is the final answer of the turn.
	Text string
	// Streamed is set when the driver already published the answer's
	// text as live output while the turn ran.
	Streamed bool
	// Usage is what the turn's processes reported consuming; a driver
	// sets it on a failed turn too.
	Usage Usage
	// ThreadUsage is the session's cumulative usage after the turn (pass
	// it back in Turn.ThreadUsage).
	ThreadUsage Usage
	// Model is the model the CLI reported answering ("" when it reports
	// none), for traces only.
	Model string
}

// Driver is the port a harness implements.
type Driver interface {
	// Turn starts (t.Session == "") or resumes a session in t.Dir and runs
	// one turn. Progress lines go to sinks as they arrive (either func may
	// be nil). It returns the final text and the session id (and the
	// usage, which a failed turn may carry too), or an error:
	// one wrapping ctx's error when ctx ended first (the process is then
	// killed), ErrEnvNotAllowed for a refused env name, ErrProviderAuth
	// when the provider refused the credential, else ErrDriver.
	// Turn never leaves a process running once it returns.
	Turn(ctx context.Context, t Turn, sinks worker.Sinks) (Reply, error)
}

// commandDriver runs the entry's argv once per turn in the turn's
// directory, in its own process group, with only the declared environment
// variables taken from the server's environment. It writes
// {"prompt","node","model","effort","session"} (effort and session null when
// empty) as JSON on stdin and reads {"session","text"} from stdout; each
// stderr line becomes a log record and live output. The process group is
// killed when the process exits or ctx ends.
type commandDriver struct{ cli }

func newCommandDriver(name string, e Entry) *commandDriver { return &commandDriver{newCLI(name, e)} }

// cli is what every driver knows of its harness entry: the harness name,
// the argv prefix, the environment names the entry allows and the
// model API base URL ("" for the CLI's default).
type cli struct {
	name    string
	argv    []string
	allowed map[string]bool
	baseURL string
	// stall ends a CLI process silent for that long (0: never; stall.go).
	stall time.Duration
}

func newCLI(name string, e Entry) cli {
	c := cli{name: name, argv: append([]string(nil), e.Argv...), allowed: map[string]bool{}, baseURL: e.BaseURL}
	for _, n := range e.Env {
		c.allowed[n] = true
	}
	return c
}

// checkEnv refuses a declared name the entry does not list.
func (c cli) checkEnv(names []string) error {
	for _, n := range names {
		if !c.allowed[n] {
			return fmt.Errorf("%w: %q (harness %s)", ErrEnvNotAllowed, n, c.name)
		}
	}
	return nil
}

// turnRequest is the JSON a command harness reads on stdin.
type turnRequest struct {
	Prompt  string  `json:"prompt"`
	Node    string  `json:"node"`
	Model   string  `json:"model"`
	Effort  *string `json:"effort"`
	Session *string `json:"session"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (d *commandDriver) Turn(ctx context.Context, t Turn, sinks worker.Sinks) (Reply, error) {
	if err := d.checkEnv(t.Env); err != nil {
		return Reply{}, err
	}
	if t.Dir == "" {
		return Reply{}, fmt.Errorf("%w: no working directory", ErrDriver)
	}
	stdin, err := json.Marshal(turnRequest{Prompt: t.Prompt, Node: t.Node, Model: t.Model, Effort: optional(t.Effort), Session: optional(t.Session)})
	if err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrDriver, err)
	}
	res := worker.Process{
		Argv: d.argv, Dir: t.Dir, Env: worker.EnvFrom(t.Env),
		Stdin: append(stdin, '\n'), MaxStdout: MaxStdoutBytes, Sinks: sinks, Started: t.Started, Confine: t.Confine, Tap: t.Tap,
	}.Run(ctx)
	if ctx.Err() != nil {
		return Reply{}, fmt.Errorf("harness %s turn ended: %w", d.name, ctx.Err())
	}
	return decodeReply(d.name, res)
}

func decodeReply(name string, res worker.ProcessResult) (Reply, error) {
	switch {
	case res.Overflow:
		return Reply{}, fmt.Errorf("%w: harness %s: stdout is over %d bytes", ErrDriver, name, MaxStdoutBytes)
	case res.StartErr != nil:
		return Reply{}, fmt.Errorf("%w: harness %s: the process could not start: %v", ErrDriver, name, res.StartErr)
	case res.Exit != nil:
		return Reply{}, fmt.Errorf("%w: harness %s: the process exited non-zero", ErrDriver, name)
	}
	var raw struct {
		Session *string `json:"session"`
		Text    *string `json:"text"`
	}
	dec := json.NewDecoder(bytes.NewReader(res.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil || dec.More() || raw.Session == nil || raw.Text == nil {
		return Reply{}, fmt.Errorf("%w: harness %s: stdout is not one {\"session\", \"text\"} object", ErrDriver, name)
	}
	r := Reply{Session: *raw.Session, Text: *raw.Text}
	if !validSession(r.Session) {
		return Reply{}, fmt.Errorf("%w: harness %s: session id must be 1..%d bytes without control characters", ErrDriver, name, maxSessionBytes)
	}
	return r, nil
}
func validSession(s string) bool {
	if s == "" || len(s) > maxSessionBytes {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
