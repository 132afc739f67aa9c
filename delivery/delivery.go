package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/workspace"
)

// Defaults of the pull request's polling.
const (
	// DefaultPoll is the pause between two observations of the pull
	// request in merge mode, and DefaultMaxPolls the observations made
	// before the delivery ends as timeout.
	DefaultPoll     = 20 * time.Second
	DefaultMaxPolls = 90
	// findAttempts bounds the find-or-create rounds, findPause apart.
	findAttempts = 5
	findPause    = time.Second
)

// Refusal reasons of a delivery.
const (
	reasonAuthenticationRequired = "authentication_required"
	reasonPolicyDenied           = "policy_denied"
)

// Job is one delivery of a run.
type Job struct {
	RunID string
	// Mode is ModePR or ModeMerge.
	Mode string
	// Source is the run's source: the pull request goes into its branch,
	// and the delivered commit must descend from its revision.
	Source workspace.Source
	// Repo is the repository's entry of the host's repository file.
	Repo workspace.Repo
	// Branch is the run's own branch, the one pushed.
	Branch string
	// Paths are the run's directories: the workspace is committed into
	// the run's own git directory (never the one its .git names).
	Paths workspace.Paths
}

// Deliverer runs deliveries. The zero value polls every DefaultPoll, at
// most DefaultMaxPolls times.
type Deliverer struct {
	Poll     time.Duration
	MaxPolls int
}

// Run delivers the job and returns a verifier outcome with the receipt,
// or an error outcome: refusal/authentication_required when the
// repository's token variable is unset, malformed when the workspace holds
// no change or the forge answers with another pull request, timeout when
// no outcome came within the observations or ctx's deadline passed,
// refusal when ctx was cancelled or the forge would not merge, crash for
// any other failure. Every step is a "delivery:" line in the sinks.
func (d Deliverer) Run(ctx context.Context, j Job, sinks worker.Sinks) worker.Outcome {
	say := func(format string, args ...any) { publish(sinks, "debug", fmt.Sprintf("delivery: "+format, args...)) }
	token, ok := j.Repo.Token()
	if !ok {
		publish(sinks, "error", fmt.Sprintf("delivery: the token variable %s of %s is not set on the server", j.Repo.TokenEnv, j.Source.Repository))
		return worker.Failed(worker.CodeRefusal, reasonAuthenticationRequired)
	}
	// git and the forge CLI get a fresh HOME of their own, outside the
	// run's directory, which agents may write.
	home, err := os.MkdirTemp("", "oecp-delivery-")
	if err != nil {
		return failure(ctx, sinks, err)
	}
	defer os.RemoveAll(home)
	g := workspace.Git{Dir: j.Paths.Workspace, GitDir: j.Paths.Git, Home: home}
	if err := workspace.ResetGitDir(j.Paths.Git); err != nil {
		return failure(ctx, sinks, err)
	}
	head, err := commit(ctx, g, j.Source.Revision, "oecp: deliver run "+j.RunID)
	if err == nil {
		say("committed %s on %s", head, j.Source.Revision)
		g.Token = token
		err = push(ctx, g, j.Repo.URL, j.Branch)
		g.Token = ""
	}
	if err != nil {
		return failure(ctx, sinks, err)
	}
	say("pushed %s to branch %s of %s", head, j.Branch, j.Source.Repository)
	cli := j.Repo.ForgeCLI()
	f := forge{argv: cli.Argv, dir: home, repo: j.Source.Repository, env: append(g.Env(), "GH_HOST="+cli.Host)}
	if token != "" {
		f.env = append(f.env, "GH_TOKEN="+token)
	}
	t := target{branch: j.Branch, head: head, base: j.Source.Branch}
	n, err := openPull(ctx, f, t, j.RunID)
	if err != nil {
		return failure(ctx, sinks, err)
	}
	say("pull request #%d from %s into %s", n, j.Branch, j.Source.Branch)
	label, diag, err := d.poll(ctx, f, n, t, j.Mode, say)
	if err != nil {
		return failure(ctx, sinks, err)
	}
	say("%s: %s", label, diag)
	receipt, _ := json.Marshal(map[string]string{
		"version": "v1", "mode": j.Mode, "outcome": label, "repository": j.Source.Repository,
		"targetBranch": j.Source.Branch, "headRevision": head, "pullRequestId": strconv.FormatInt(n, 10),
	})
	message, _ := json.Marshal(map[string]string{"message": diag})
	return worker.Outcome{Status: "verifier", Output: receipt, Signals: map[string]string{"delivery": label}, Diagnostic: message}
}

// openPull finds the run's pull request or creates it, in up to
// findAttempts rounds: a creation that raced another one finds it in the
// next round.
func openPull(ctx context.Context, f forge, t target, runID string) (int64, error) {
	var err error
	for round := 0; round < findAttempts; round++ {
		if round > 0 && !sleep(ctx, findPause) {
			return 0, ctx.Err()
		}
		var n int64
		if n, err = f.find(ctx, t); err == nil && n == 0 {
			n, err = f.create(ctx, t, "oecp: run "+runID,
				fmt.Sprintf("Delivered by oecp from run %s: branch %s at %s, based on %s.", runID, t.branch, t.head, t.base))
		}
		if err == nil || errors.Is(err, errRejected) || errors.Is(err, errNoForge) {
			return n, err
		}
	}
	return 0, err
}

// poll observes the pull request until the mode's outcome: PR mode ends
// at the first open observation; merge mode waits for the checks,
// requests the merge once they pass (or none is required) and ends
// merged, conflict or ci_failed.
func (d Deliverer) poll(ctx context.Context, f forge, n int64, t target, mode string, say func(string, ...any)) (label, diag string, err error) {
	interval, polls := d.Poll, d.MaxPolls
	if interval <= 0 {
		interval = DefaultPoll
	}
	if polls <= 0 {
		polls = DefaultMaxPolls
	}
	requested := false
	for i := 0; i < polls; i++ {
		if i > 0 && !sleep(ctx, interval) {
			return "", "", ctx.Err()
		}
		state, err := f.observe(ctx, n, t)
		switch {
		case err != nil:
			return "", "", err
		case state == stateMerged && mode == ModeMerge:
			return Merged, fmt.Sprintf("pull request #%d is merged", n), nil
		case state == stateMerged || state == stateClosed:
			return "", "", fmt.Errorf("pull request #%d is %s", n, state)
		case mode == ModePR:
			return Opened, fmt.Sprintf("pull request #%d is open", n), nil
		case state == stateConflict:
			return Conflict, fmt.Sprintf("pull request #%d conflicts with %s", n, t.base), nil
		}
		result, ci, err := f.checks(ctx, t.head)
		switch {
		case err != nil:
			return "", "", err
		case result == checksFailed:
			return CIFailed, ci, nil
		case result == checksPending:
			say("checks of %s are pending", t.head)
			continue
		case requested:
			return "", "", errPolicyDenied
		}
		requested = true
		switch state, err := f.merge(ctx, n, t, "oecp: merge pull request #"+strconv.FormatInt(n, 10)); {
		case err != nil:
			return "", "", err
		case state == stateMerged:
			return Merged, fmt.Sprintf("pull request #%d is merged", n), nil
		case state == stateConflict:
			return Conflict, fmt.Sprintf("pull request #%d conflicts with %s", n, t.base), nil
		}
		say("merge of pull request #%d requested", n)
	}
	return "", "", errExhausted
}

// failure maps a failed delivery to its outcome and logs why.
func failure(ctx context.Context, sinks worker.Sinks, err error) worker.Outcome {
	publish(sinks, "error", "delivery failed: "+err.Error())
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return worker.Failed(worker.CodeTimeout, worker.ReasonDeclaredFailure)
	case ctx.Err() != nil:
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	case errors.Is(err, errNoChange), errors.Is(err, errRejected):
		return worker.Failed(worker.CodeMalformed, worker.ReasonDeclaredFailure)
	case errors.Is(err, errPolicyDenied):
		return worker.Failed(worker.CodeRefusal, reasonPolicyDenied)
	case errors.Is(err, errExhausted):
		return worker.Failed(worker.CodeTimeout, worker.ReasonDeclaredFailure)
	}
	return worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// publish sends one line to the log and to live output.
func publish(s worker.Sinks, level, line string) {
	if s.Log != nil {
		s.Log(level, line)
	}
	if s.Output != nil {
		s.Output(line)
	}
}

// Failures of a delivery, after its commit and push: a forge call that
// failed or answered something unusable (errForge), a forge CLI that does
// not start (errNoForge), a pull request that is not the run's
// (errRejected), a merge the forge kept pending (errPolicyDenied), and
// observations that ran out before an outcome (errExhausted).
var (
	errForge, errNoForge = errors.New("forge call failed"), errors.New("forge CLI unavailable")
	errRejected          = errors.New("pull request does not match the delivery")
	errPolicyDenied      = errors.New("the forge did not merge the pull request it was asked to merge")
	errExhausted         = errors.New("no outcome within the observations")
)
