package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oecp/oecp/engine/worker"
)

// Bounds of forge calls.
const (
	// forgeTimeout bounds one forge call.
	forgeTimeout = 2 * time.Minute
	// maxForgeOutput bounds one forge answer.
	maxForgeOutput = 256 << 10
)

// pull is the part of a pull request delivery reads.
type pull struct {
	Number int64  `json:"number"`
	State  string `json:"state"`
	Head   end    `json:"head"`
	Base   end    `json:"base"`
	merging
}

// merging is where a pull request stands toward its merge: Merged, or
// MergedAt (a list carries only that), marks a merged one; Mergeable is
// false for a conflict and null while the forge computes it.
type merging struct {
	Merged         bool    `json:"merged"`
	MergedAt       *string `json:"merged_at"`
	Mergeable      *bool   `json:"mergeable"`
	MergeCommitSHA string  `json:"merge_commit_sha"`
}

type end struct {
	Ref  string `json:"ref"`
	SHA  string `json:"sha"`
	Repo struct {
		FullName string `json:"full_name"`
	} `json:"repo"`
}

// forge calls a repository's forge CLI as `<argv…> api <path> …` with the
// REST shape of GitHub, in a clean environment (git's, with GH_HOST and,
// when there is a token, GH_TOKEN).
type forge struct {
	argv []string
	dir  string
	env  []string
	repo string // owner/name
}

// call runs one API call and decodes its JSON answer into out.
func (f forge) call(ctx context.Context, out any, path string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, forgeTimeout)
	defer cancel()
	argv := append(slices.Clone(f.argv), "api", path)
	res := worker.Process{Argv: append(argv, args...), Dir: f.dir, Env: f.env, MaxStdout: maxForgeOutput}.Run(ctx)
	what := strings.Join(append([]string{f.argv[0], "api", path}, args...), " ")
	switch {
	case res.StartErr != nil:
		return fmt.Errorf("%w: the forge CLI %s could not start (set forge.argv of %s in the server's --repos file): %v", errNoForge, f.argv[0], f.repo, res.StartErr)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s: %v", errForge, what, ctx.Err())
	case res.Overflow:
		return fmt.Errorf("%w: %s: answer over %d bytes", errForge, what, maxForgeOutput)
	case res.Exit != nil:
		return fmt.Errorf("%w: %s was rejected: %v: %s", errForge, what, res.Exit, bytes.TrimSpace(res.Stdout))
	}
	if err := json.Unmarshal(res.Stdout, out); err != nil {
		return fmt.Errorf("%w: %s answered no JSON: %v", errForge, what, err)
	}
	return nil
}

// target is the pull request a delivery wants: its branch, at head, into
// base of the same repository.
type target struct {
	branch, head, base string
}

// matches reports whether p is the delivery's pull request: head branch
// and commit, base branch, and both in the repository itself (never a
// fork).
func (f forge) matches(p pull, t target) bool {
	same := func(name string) bool { return strings.EqualFold(name, f.repo) }
	return p.Number > 0 && p.Head.Ref == t.branch && p.Head.SHA == t.head && p.Base.Ref == t.base &&
		same(p.Head.Repo.FullName) && same(p.Base.Repo.FullName)
}

// find returns the delivery's pull request (0 when there is none); more
// than one is rejected.
func (f forge) find(ctx context.Context, t target) (int64, error) {
	var list []pull
	owner, _, _ := strings.Cut(f.repo, "/")
	if err := f.call(ctx, &list, "repos/"+f.repo+"/pulls", "--method", "GET",
		"-f", "state=all", "-f", "head="+owner+":"+t.branch, "-f", "base="+t.base); err != nil {
		return 0, err
	}
	var found int64
	for _, p := range list {
		if f.matches(p, t) {
			if found != 0 {
				return 0, fmt.Errorf("%w: more than one pull request from %s into %s", errRejected, t.branch, t.base)
			}
			found = p.Number
		}
	}
	return found, nil
}

// create opens the delivery's pull request.
func (f forge) create(ctx context.Context, t target, title, body string) (int64, error) {
	var p pull
	if err := f.call(ctx, &p, "repos/"+f.repo+"/pulls", "--method", "POST",
		"-f", "title="+title, "-f", "body="+body, "-f", "head="+t.branch, "-f", "base="+t.base); err != nil {
		return 0, err
	}
	if !f.matches(p, t) {
		return 0, fmt.Errorf("%w: the created pull request #%d is from %s at %s into %s", errRejected, p.Number, p.Head.Ref, p.Head.SHA, p.Base.Ref)
	}
	return p.Number, nil
}

// Observations of a pull request.
const (
	stateOpen     = "open"
	stateMerged   = "merged"
	stateClosed   = "closed"
	stateConflict = "conflict"
)

// observe reads the pull request: merged, closed, conflict (open and not
// mergeable) or open.
func (f forge) observe(ctx context.Context, n int64, t target) (string, error) {
	var p pull
	if err := f.call(ctx, &p, "repos/"+f.repo+"/pulls/"+strconv.FormatInt(n, 10), "--method", "GET"); err != nil {
		return "", err
	}
	if !f.matches(p, t) {
		return "", fmt.Errorf("%w: pull request #%d is now from %s at %s into %s", errRejected, n, p.Head.Ref, p.Head.SHA, p.Base.Ref)
	}
	switch {
	case p.Merged || p.MergedAt != nil:
		if p.State != "closed" || !shaRE.MatchString(p.MergeCommitSHA) {
			return "", fmt.Errorf("%w: pull request #%d is merged but not closed with a merge commit", errRejected, n)
		}
		return stateMerged, nil
	case p.State == "closed":
		return stateClosed, nil
	case p.State != "open":
		return "", fmt.Errorf("%w: pull request #%d has state %q", errRejected, n, p.State)
	case p.Mergeable != nil && !*p.Mergeable:
		return stateConflict, nil
	}
	return stateOpen, nil
}

// merge asks the forge to merge the pull request at head: merged, conflict
// or pending (the forge took no decision yet).
func (f forge) merge(ctx context.Context, n int64, t target, title string) (string, error) {
	var res struct {
		Merged bool   `json:"merged"`
		SHA    string `json:"sha"`
	}
	err := f.call(ctx, &res, "repos/"+f.repo+"/pulls/"+strconv.FormatInt(n, 10)+"/merge", "--method", "PUT",
		"-f", "sha="+t.head, "-f", "merge_method=merge", "-f", "commit_title="+title)
	if err == nil && res.Merged && shaRE.MatchString(res.SHA) {
		return stateMerged, nil
	}
	// Refused or undecided: the pull request says which.
	switch state, err := f.observe(ctx, n, t); {
	case err != nil:
		return "", err
	case state == stateConflict:
		return stateConflict, nil
	case state != stateOpen:
		return "", fmt.Errorf("%w: pull request #%d is %s after the merge request", errRejected, n, state)
	}
	return "pending", nil
}
