package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// Failure reasons of refusals this package returns.
const (
	ReasonAuthenticationRequired = "authentication_required"
	ReasonPolicyDenied           = "policy_denied"
)

// DefaultDeadline is the driver deadline of one execution: every turn of
// it, corrections included, must end before it. Passing it is a crash,
// unlike the node's own timeout, which the caller's ctx carries.
const DefaultDeadline = 6 * time.Hour

// errDeadline is the cause of the driver deadline.
var errDeadline = errors.New("harness driver deadline passed")

// errBudget ends an execution whose run went over the agent budget.
var errBudget = errors.New("agent budget exceeded")

// Runner runs executions of agent nodes through one harness driver. It
// keeps the node_instance session table; it is safe for concurrent use.
type Runner struct {
	driver   Driver
	deadline time.Duration
	sessions sessionTable
	// harness names the runner's harness in usage reports; usage, when
	// set, sees every turn's usage; budget bounds each run's reported
	// cost.
	harness string
	usage   UsageObserver
	budget  budget
	sandbox *sandbox.Host
}

// NewRunner returns a runner over d with the DefaultDeadline; a deadline
// <= 0 means the default.
func NewRunner(d Driver, deadline time.Duration) *Runner {
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	return &Runner{driver: d, deadline: deadline}
}

// Job is one bound agent node as the supervisor dispatches it.
type Job struct {
	// Key names the run on this server (its workspace key, unique across
	// tenants): it keys the run's node_instance sessions (with Instance,
	// the node instance id, stable across loop revisits), its agent
	// budget and its sandbox writer identity.
	Key      string
	Instance string
	// Node is the graph node (*graph.Step or *graph.Verifier with
	// instructions).
	Node graph.Node
	// Execution identifies this execution within the run (a fresh
	// session's private home is named after it).
	Execution string
	// Binding is the node's runtime binding.
	Binding Binding
	// Provider is the runtime plan's provider.
	Provider string
	// Dir is the execution's working directory.
	Dir string
	// Runtime is the run's private directory, where each session gets its
	// home (mode 0700): "{writer,verifier}-node-instance-<Instance>" for a
	// node_instance session, "{writer,verifier}-execution-<Execution>"
	// otherwise, removed when the execution ends. "" gives no home.
	Runtime string
	// GitDir is the run's git directory outside Dir ("" none); a sandbox
	// shows it to the execution as git needs it, and Objects, the object
	// directory it borrows from, read-only.
	GitDir  string
	Objects string
	// Spending, when set, keeps the run's reported cost for its budget in
	// the run's record (nil: this runner's memory keeps it).
	Spending Spending
}

// Worker adapts one job to engine/worker's Worker; as with Run, the
// execution's sinks must already redact the job's declared values.
func (r *Runner) Worker(job Job) worker.Worker {
	return worker.WorkerFunc(func(ctx context.Context, ex worker.Execution) worker.Outcome { return r.Run(ctx, job, ex) })
}

// CloseRun forgets a finished run's sessions and spending; a session
// still in use is marked lost. The run's sandbox identity and networks are
// not the runner's: the sandbox's owner, which may share it among several
// runners, ends them (sandbox.Host.CloseRun).
func (r *Runner) CloseRun(key string) {
	r.sessions.closeRun(key)
	r.budget.forget(key)
}

// Run executes one job with ex.Input and returns its outcome:
//   - a valid answer: "verified" (step) or "verifier";
//   - still invalid after MaxCorrections correction turns in the same
//     session: malformed/malformed_result;
//   - ctx ended: timeout on its deadline, refusal on cancellation;
//   - an agent CLI silent for the stall timeout: timeout;
//   - a declared env variable unset in the server environment:
//     refusal/authentication_required; one the harness does not allow:
//     refusal/policy_denied;
//   - anything else (driver error, driver deadline, a lost node_instance
//     session, a node without instructions): crash.
//
// Every stderr line and every line of each answer goes to ex.Sinks as the
// agent wrote it: the caller's sinks redact. The runs package redacts each
// line of a run once, with the values its plan declares for all its nodes
// (this node's among them); a second pass here could only garble the
// first pass's markers (a declared value inside "[REDACTED]").
func (r *Runner) Run(ctx context.Context, job Job, ex worker.Execution) worker.Outcome {
	log := slog.With("run", job.Key, "node", ex.Node, "execution", ex.Ref)
	c, instructions, err := ContractFor(job.Node)
	if err != nil {
		log.ErrorContext(ctx, "agent node refused by the harness runner", "err", err)
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	}
	prompt, err := RenderPrompt(instructions, ex.Input, c)
	if err != nil {
		log.ErrorContext(ctx, "agent input refused", "err", err)
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	}
	if spent, over := r.budget.over(ctx, job); over {
		log.WarnContext(ctx, "agent budget exceeded: the run's agents reported more cost than --max-agent-usd-per-run", "spentUsd", spent, "maxUsd", r.budget.maxUSD)
		publish(ex.Sinks, string(streamError), fmt.Sprintf("%v: the run's agents reported %.6f USD, over the --max-agent-usd-per-run budget of %.6f USD", errBudget, spent, r.budget.maxUSD))
		return worker.Failed(worker.CodeRefusal, ReasonPolicyDenied)
	}
	if missing := unsetEnv(job.Binding.Env); missing != "" {
		log.WarnContext(ctx, "declared env variable unset on the server", "env", missing)
		return worker.Failed(worker.CodeRefusal, ReasonAuthenticationRequired)
	}
	var entry *sessionEntry
	conv := conversation{r: r, job: job, ex: ex, c: c, log: log}
	if job.Binding.SessionScope == ScopeNodeInstance {
		if entry, err = r.sessions.checkout(ctx, sessionKey{job.Key, job.Instance}); err != nil {
			log.WarnContext(ctx, "node instance session unavailable", "err", err)
			return r.failure(ctx, ctx, err)
		}
		conv.session, conv.resume, conv.thread = entry.id, entry.used, entry.thread
	}
	if conv.home, err = makeHome(job, c.Verifier); err != nil {
		log.ErrorContext(ctx, "agent home unavailable", "err", err)
		if entry != nil {
			r.sessions.release(entry, "", false)
		}
		return worker.HostFailed(hostReason(err, "the server could not make the session's home directory"))
	}
	if job.Binding.SessionScope != ScopeNodeInstance && conv.home != "" {
		defer os.RemoveAll(conv.home)
	}
	exe, err := r.confineTraced(ctx, job, conv.home, c.Verifier)
	if err != nil {
		log.ErrorContext(ctx, "agent sandbox unavailable", "err", err)
		if entry != nil {
			r.sessions.release(entry, "", false)
		}
		return worker.HostFailed(hostReason(err, "the server could not set up the agent's sandbox"))
	}
	defer exe.Close()
	conv.confine = exe.Confine
	dctx, cancel := context.WithTimeoutCause(ctx, r.deadline, errDeadline)
	defer cancel()
	out, err := conv.run(dctx, prompt)
	if entry != nil {
		entry.thread = conv.thread
		r.sessions.release(entry, conv.session, err == nil)
	}
	if limit := exe.Limit(); limit != "" && ctx.Err() == nil {
		log.ErrorContext(ctx, "agent execution ended: it hit its limit", "limit", limit)
		system(ex.Sinks, "the execution was stopped: it hit its --"+limit+" limit")
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	}
	if err != nil {
		log.WarnContext(ctx, "agent execution failed", "err", err)
		if errors.Is(err, ErrProviderAuth) {
			log.WarnContext(ctx, "the provider refused the agent's credential", "status", authStatus(err.Error()))
		}
		if errors.Is(err, errBudget) {
			publish(ex.Sinks, string(streamError), err.Error())
		}
		if why := hostReason(err, ""); why != "" && ctx.Err() == nil {
			return worker.HostFailed(why)
		}
		return r.failure(ctx, dctx, err)
	}
	return out
}

// account records one turn's usage: a log line, the observer, and the
// run's budget; it returns an error when the run is over its budget.
func (r *Runner) account(ctx context.Context, job Job, ex worker.Execution, log *slog.Logger, u Usage) error {
	if u == (Usage{}) {
		return nil
	}
	publish(ex.Sinks, string(streamOutput), u.String())
	log.Info("agent usage", "input", u.Input, "cachedInput", u.CachedInput, "output", u.Output, "reasoning", u.Reasoning, "costUsd", u.CostUSD)
	if r.usage != nil {
		r.usage.AgentUsage(r.harness, job.Binding.Model, u)
	}
	if spent, over := r.budget.charge(ctx, job, u.CostUSD); over {
		return fmt.Errorf("%w: the run's agents reported %.6f USD, over the --max-agent-usd-per-run budget of %.6f USD", errBudget, spent, r.budget.maxUSD)
	}
	return nil
}

// failure maps a turn error to an outcome; ctx is the caller's context and
// dctx the one carrying the driver deadline.
func (r *Runner) failure(ctx, dctx context.Context, err error) worker.Outcome {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return worker.Failed(worker.CodeTimeout, worker.ReasonDeclaredFailure)
	case ctx.Err() != nil:
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	case errors.Is(context.Cause(dctx), errDeadline):
		return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
	case errors.Is(err, ErrEnvNotAllowed), errors.Is(err, errBudget):
		return worker.Failed(worker.CodeRefusal, ReasonPolicyDenied)
	case errors.Is(err, ErrProviderAuth):
		return worker.Failed(worker.CodeRefusal, ReasonAuthenticationRequired)
	case errors.Is(err, ErrStalled):
		return worker.Failed(worker.CodeTimeout, worker.ReasonDeclaredFailure)
	}
	return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
}

// makeHome creates the session's private home under job.Runtime ("" when
// there is none).
func makeHome(job Job, verifier bool) (string, error) {
	if job.Runtime == "" {
		return "", nil
	}
	role, name := "writer", "execution-"+job.Execution
	if verifier {
		role = "verifier"
	}
	if job.Binding.SessionScope == ScopeNodeInstance {
		name = "node-instance-" + job.Instance
	}
	home := filepath.Join(job.Runtime, role+"-"+name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	return home, os.Chmod(home, 0o700)
}

// conversation is the turns of one execution. session is the harness
// session id, "" until a turn returned one; resume is set once the
// conversation has a history to continue (a node_instance session used
// before, or after the first turn); home is the session's private home.
type conversation struct {
	r       *Runner
	job     Job
	ex      worker.Execution
	c       Contract
	session string
	resume  bool
	home    string
	log     *slog.Logger
	// thread is the session's cumulative usage (Codex reports it so).
	thread  Usage
	confine func(cmd *exec.Cmd) (start func() error, cleanup func(), err error)
}

// run sends the prompt, then up to MaxCorrections corrections in the same
// session. A nil error means a clean end: a valid outcome or malformed.
func (v *conversation) run(ctx context.Context, prompt string) (worker.Outcome, error) {
	for turn := 0; ; turn++ {
		v.log.InfoContext(ctx, "harness turn", "turn", turn, "resume", v.resume)
		tctx, span := v.traceTurn(ctx, turn)
		reply, err := v.r.driver.Turn(tctx, Turn{
			Dir: v.job.Dir, Node: v.ex.Node, Model: v.job.Binding.Model, Effort: v.job.Binding.Effort,
			Session: v.session, Resume: v.resume, Prompt: prompt, Env: v.job.Binding.Env,
			Verifier: v.c.Verifier, Provider: v.job.Provider, Home: v.home, Started: v.ex.Started, ThreadUsage: v.thread,
			Confine: v.confine, Tap: v.ex.Tap,
		}, v.ex.Sinks)
		v.thread = reply.ThreadUsage
		if berr := v.r.account(ctx, v.job, v.ex, v.log, reply.Usage); berr != nil && err == nil {
			err = berr
		}
		v.endTurn(ctx, span, reply, err)
		if err != nil {
			return worker.Outcome{}, err
		}
		if v.session != "" && reply.Session != v.session {
			return worker.Outcome{}, fmt.Errorf("%w: the harness changed session on a resumed turn", ErrDriver)
		}
		v.session, v.resume = reply.Session, true
		if !reply.Streamed {
			emitLines(v.ex.Sinks, streamOutput, reply.Text)
		}
		out, verr := v.c.Validate(reply.Text)
		if verr == nil {
			return out, nil
		}
		v.log.InfoContext(ctx, "agent answer rejected", "turn", turn)
		if turn == MaxCorrections {
			system(v.ex.Sinks, "answer still invalid after "+fmt.Sprint(MaxCorrections)+" corrections: malformed")
			return worker.Failed(worker.CodeMalformed, worker.ReasonMalformedResult), nil
		}
		system(v.ex.Sinks, "answer rejected, correction turn "+fmt.Sprint(turn+1)+": "+verr.Error())
		prompt = RenderCorrection(verr.Error(), v.c)
	}
}

// unsetEnv returns the first of the declared variables the server
// environment lacks ("" when it has them all).
func unsetEnv(names []string) string {
	for _, n := range names {
		if _, ok := os.LookupEnv(n); !ok {
			return n
		}
	}
	return ""
}

// system publishes a runtime notice.
func system(s worker.Sinks, msg string) { emit(s, streamSystem, msg) }

// publish sends one line to the log sink at level and to live output,
// sanitized and bounded.
func publish(s worker.Sinks, level, line string) {
	if s.Log != nil {
		s.Log(level, worker.SanitizeLine(line, protocol.MaxLogMessageBytes, protocol.RedactedLogMessage))
	}
	if s.Output != nil {
		s.Output(worker.SanitizeLine(line, protocol.MaxAttachOutputBytes, protocol.RedactedAttachOutput))
	}
}
