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
	head, err := g.CommitAll(ctx, committerName, committerEmail, message)
	if err != nil {
		return "", err
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
