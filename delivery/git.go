package delivery

import (
	"context"
	"errors"
	"fmt"
	"regexp"

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

// commit stages everything in the workspace and commits it, when there is
// anything, with the fixed identity and without hooks, g having no token; it returns the head
// commit, which must descend from base and differ from it.
func commit(ctx context.Context, g workspace.Git, base, message string) (string, error) {
	if _, err := g.Run(ctx, "add", "--all"); err != nil {
		return "", err
	}
	switch code, err := g.Status(ctx, "diff", "--cached", "--quiet", "--exit-code"); {
	case err != nil:
		return "", err
	case code == 1:
		if _, err := g.Run(ctx, "-c", "user.name="+committerName, "-c", "user.email="+committerEmail,
			"commit", "--no-verify", "--quiet", "--message", message); err != nil {
			return "", err
		}
	case code != 0:
		return "", fmt.Errorf("git diff --cached exited %d", code)
	}
	head, err := g.Run(ctx, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if !shaRE.MatchString(head) {
		return "", fmt.Errorf("HEAD %q is not a commit id", head)
	}
	if head == base {
		return "", fmt.Errorf("%w: the workspace has no change on %s", errNoChange, base)
	}
	if code, err := g.Status(ctx, "merge-base", "--is-ancestor", base, head); err != nil || code != 0 {
		return "", fmt.Errorf("the delivered commit %s does not descend from the source revision %s (%v)", head, base, err)
	}
	return head, nil
}

// push sends HEAD to branch of the remote at url, without hooks, never
// forced, and over https (or to a local path) only.
func push(ctx context.Context, g workspace.Git, url, branch string) error {
	_, err := g.Run(ctx, "-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c", "protocol.file.allow=always",
		"push", "--porcelain", "--no-verify", url, "HEAD:refs/heads/"+branch)
	return err
}
