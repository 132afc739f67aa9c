package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	// Paths are the run's directories.
	Paths workspace.Paths
	// Key names the run's directories in Records, which records the
	// workspace in the run's host git directory: delivery commits and
	// pushes from there, never from the git directory agents write.
	Key     string
	Records Recorder
	// Input is the delivery node's input: a record whose optional string
	// fields "title" (its first line with text titles the pull request)
	// and "closes" (an issue the pull request closes, #N or OWNER/NAME#N)
	// shape the pull request; any other input asks for neither.
	Input json.RawMessage
}

// Recorder records a run's workspace as a commit on its branch, in the
// host git directory that git commands of HostGit run in; the run's gate
// is held. *workspace.Manager is one.
type Recorder interface {
	Snapshot(ctx context.Context, key, home string, id workspace.Identity, message string, lim workspace.Limits) (workspace.Snap, error)
	HostGit(key, home string) workspace.Git
}

// Deliverer runs deliveries. The zero value polls every DefaultPoll, at
// most DefaultMaxPolls times, records within the default snapshot limits
// and logs to slog's default logger.
type Deliverer struct {
	Poll     time.Duration
	MaxPolls int
	Limits   workspace.Limits
	// Log receives what host programs printed about a failure; the run's
	// own log gets a fixed sentence.
	Log *slog.Logger
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
	req, err := parseRequest(j.Input)
	if err != nil {
		publish(sinks, "error", "delivery failed: "+err.Error())
		return worker.Failed(worker.CodeMalformed, worker.ReasonDeclaredFailure)
	}
	token, ok := j.Repo.Token()
	if !ok {
		publish(sinks, "error", fmt.Sprintf("delivery: the token variable %s of %s is not set on the server", j.Repo.TokenEnv, j.Source.Repository))
		return worker.Failed(worker.CodeRefusal, reasonAuthenticationRequired)
	}
	// git and the forge CLI get a fresh HOME of their own, outside the
	// run's directory, which agents may write.
	home, err := os.MkdirTemp("", "oecp-delivery-")
	if err != nil {
		return d.failure(ctx, sinks, stageRecord, err)
	}
	defer os.RemoveAll(home)
	head, err := d.commit(ctx, j, home)
	if err != nil {
		return d.failure(ctx, sinks, stageRecord, err)
	}
	say("committed %s on %s", head, j.Source.Revision)
	g := j.Records.HostGit(j.Key, home)
	g.Token, g.Remote = token, j.Repo.URL
	pctx, pushed := traced(ctx, "git push")
	to, err := push(pctx, g, j.Repo.URL, head, j.Branch)
	pushed(err)
	g.Token = ""
	if err != nil {
		return d.failure(ctx, sinks, stagePush, err)
	}
	say("pushed %s to branch %s of %s (git reports %s)", head, j.Branch, j.Source.Repository, to)
	cli := j.Repo.ForgeCLI()
	f := forge{argv: cli.Argv, dir: home, repo: j.Source.Repository, env: append(g.Env(), "GH_HOST="+cli.Host)}
	if token != "" {
		f.env = append(f.env, "GH_TOKEN="+token)
	}
	t := target{branch: j.Branch, head: head, base: j.Source.Branch}
	prctx, pulled := traced(ctx, "pull request")
	n, err := openPull(prctx, f, t, j.RunID, req)
	if err != nil {
		pulled(err)
		return d.failure(ctx, sinks, stageForge, err)
	}
	say("pull request #%d from %s into %s", n, j.Branch, j.Source.Branch)
	label, diag, err := d.poll(prctx, f, n, t, j.Mode, say)
	pulled(err)
	if err != nil {
		return d.failure(ctx, sinks, stageForge, err)
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
func openPull(ctx context.Context, f forge, t target, runID string, req request) (int64, error) {
	var err error
	for round := 0; round < findAttempts; round++ {
		if round > 0 && !sleep(ctx, findPause) {
			return 0, ctx.Err()
		}
		var n int64
		if n, err = f.find(ctx, t); err == nil && n == 0 {
			n, err = f.create(ctx, t, req.pullTitle(runID), req.pullBody(runID, t))
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

// Stages of a delivery, each with the sentence the run's log gets when
// it fails with a host program's error: what git printed stays in the
// server's log, since it may quote files the host read.
const (
	stageRecord = "the workspace could not be recorded"
	stagePush   = "the push was refused or could not reach the repository"
	stageForge  = ""
)

// failure maps a failed delivery to its outcome and says why: errors of
// its own in full; a host program's error (git's) as the stage's sentence
// in the run's log, in full in the server's.
func (d Deliverer) failure(ctx context.Context, sinks worker.Sinks, stage string, err error) worker.Outcome {
	line := err.Error()
	switch {
	case errors.Is(err, workspace.ErrNestedRepository), errors.Is(err, workspace.ErrTooLarge), errors.Is(err, errNoChange):
		// The host's own words: a bound, a path of the workspace.
	case stage != "":
		log := d.Log
		if log == nil {
			log = slog.Default()
		}
		log.WarnContext(ctx, "delivery failed", "stage", stage, "err", err)
		line = stage + " (the server's log says why)"
	}
	publish(sinks, "error", "delivery failed: "+line)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return worker.Failed(worker.CodeTimeout, worker.ReasonDeclaredFailure)
	case ctx.Err() != nil:
		return worker.Failed(worker.CodeRefusal, worker.ReasonDeclaredFailure)
	case errors.Is(err, errNoChange), errors.Is(err, errRejected), errors.Is(err, workspace.ErrNestedRepository), errors.Is(err, workspace.ErrTooLarge):
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
