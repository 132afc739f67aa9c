package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/oecp/oecp/capsule"
)

// fetchTimeout bounds the fetch of a delivered branch into the checkout.
const fetchTimeout = 2 * time.Minute

// fetchDelivered brings the branch a run delivered into the user's git
// checkout top, once `run submit --watch` (with the checkout as its
// source) has ended: `git fetch origin refs/heads/B:refs/heads/B`, so that
// `git diff BRANCH...B` shows the change. It fetches only from the
// checkout's origin, and only when the receipt's repository is the one
// origin names (the server delivered there, or to a local path origin
// points at); the ref is the run's own oecp/run-… branch, created or
// fast-forwarded, never forced, so the user's branches and work tree are
// never touched (git refuses to fetch into the branch checked out). A
// fetch that fails says so on stderr and changes nothing else.
func (c *cli) fetchDelivered(top, sourceRepo string, r *capsule.Receipt) {
	if top == "" || r == nil || r.Branch == "" || !strings.HasPrefix(r.Branch, "oecp/run-") || r.Repository != sourceRepo {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	ref := "refs/heads/" + r.Branch
	cmd := exec.CommandContext(ctx, "git", "-C", top, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "origin", ref+":"+ref)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(c.stderr, "oecp %s: the delivered branch %s was not fetched into %s: %v: %s\n  `git fetch origin %s` fetches it where origin can reach it.\n",
			c.name, r.Branch, top, err, truncate(strings.TrimSpace(string(out))), r.Branch)
		return
	}
	fmt.Fprintf(c.stdout, "fetched: branch %s into %s; `git diff %s...%s` shows the change\n", r.Branch, top, r.TargetBranch, r.Branch)
}
