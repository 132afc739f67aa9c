package delivery

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/oecp/oecp/workspace"
)

// The delivery commit's fixed identity.
const (
	committerName  = "oecp"
	committerEmail = "delivery@oecp.invalid"
)

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// errNoChange is a workspace with nothing to deliver: its head is the
// source revision.
var errNoChange = errors.New("nothing to deliver")

// commit records the workspace on the run's branch in its host git
// directory, with the fixed identity, and returns the branch's head, which
// must descend from the source revision and hold a change to it.
func (d Deliverer) commit(ctx context.Context, j Job, home string) (string, error) {
	snap, err := j.Records.Snapshot(ctx, j.Key, home, workspace.Identity{Name: committerName, Email: committerEmail},
		"oecp: deliver run "+j.RunID, d.Limits)
	if err != nil {
		return "", err
	}
	head, base := snap.Commit, j.Source.Revision
	g := j.Records.HostGit(j.Key, home)
	trees, err := g.Run(ctx, "rev-parse", head+"^{tree}", base+"^{tree}")
	if err != nil {
		return "", err
	}
	if t := strings.Fields(trees); len(t) == 2 && t[0] == t[1] {
		return "", fmt.Errorf("%w: the workspace has no change on %s", errNoChange, base)
	}
	if code, err := g.Status(ctx, "merge-base", "--is-ancestor", base, head); err != nil || code != 0 {
		return "", fmt.Errorf("the delivered commit %s does not descend from the source revision %s (%v)", head, base, err)
	}
	return head, nil
}

// push sends commit to branch of the remote at url, without hooks, never
// forced, over https (or to a local path) only, from the host git
// directory g runs in; it returns the remote as git reports pushing to it
// (without credentials), after checking git updated exactly that branch.
func push(ctx context.Context, g workspace.Git, url, commit, branch string) (string, error) {
	ref := "refs/heads/" + branch
	out, err := g.Run(ctx, "-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c", "protocol.file.allow=always",
		"push", "--porcelain", "--no-verify", url, commit+":"+ref)
	if err != nil {
		return "", err
	}
	var to string
	updated := false
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if rest, ok := strings.CutPrefix(line, "To "); ok {
			to = workspace.StripUserinfo(rest)
		}
		if f := strings.Split(line, "\t"); len(f) >= 2 && f[1] == commit+":"+ref && f[0] != "!" {
			updated = true
		}
	}
	if !updated {
		return "", fmt.Errorf("git did not report the update of %s: %s", ref, workspace.StripUserinfo(out))
	}
	return to, nil
}
