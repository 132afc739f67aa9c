package workspace

import (
	"context"
	"fmt"
	"regexp"
)

// commitIDRE is a full SHA-1 commit id as git prints it.
var commitIDRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// CommitAll stages everything git does not ignore and commits it, when
// there is anything, as name <email> and without hooks; it returns the
// head commit (the one it made, or the unchanged head).
func (g Git) CommitAll(ctx context.Context, name, email, message string) (string, error) {
	if _, err := g.Run(ctx, "add", "--all"); err != nil {
		return "", err
	}
	switch code, err := g.Status(ctx, "diff", "--cached", "--quiet", "--exit-code"); {
	case err != nil:
		return "", err
	case code == 1:
		if _, err := g.Run(ctx, "-c", "user.name="+name, "-c", "user.email="+email,
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
	if !commitIDRE.MatchString(head) {
		return "", fmt.Errorf("HEAD %q is not a commit id", head)
	}
	return head, nil
}
