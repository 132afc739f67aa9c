// Package checkpoint moves a native run's workspace between the servers
// that share its ledger. After each writer execution, Take records the
// workspace as a commit on the run's branch in the host's git directory
// (without hooks, and with the git configuration the host writes, never
// one an agent wrote) and packs that commit as a git bundle relative to
// the run's source revision, to be kept in the ledger; or, with Push, it
// pushes the commit to a hidden ref of the repository's remote instead.
// Restore rebuilds a workspace from the source revision plus such a
// checkpoint on any host. Files git ignores are not part of a checkpoint.
package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/oecp/oecp/workspace"
)

// DefaultMaxBytes bounds the size of a checkpoint's bundle: a larger one is
// not kept (--checkpoint-max-bytes).
const DefaultMaxBytes = 64 << 20

// The checkpoint commit's fixed identity and message.
const (
	committerName  = "oecp"
	committerEmail = "checkpoint@oecp.invalid"
)

// HiddenRefPrefix is where Push keeps a run's checkpoint on the remote:
// the prefix and the run's branch name, outside refs/heads and refs/tags,
// so that clones and fetches of branches never see it.
const HiddenRefPrefix = "refs/oecp/checkpoints/"

// Errors of Restore, each wrapped with what failed. ErrSkipped: the run's
// latest checkpoint was not kept (too large, or it could not be made), so
// its workspace cannot be rebuilt anywhere else; ErrCorrupt: the kept
// checkpoint is not a bundle of the run's work on its source revision;
// ErrRevisionGone: the repository no longer has the source revision.
var (
	ErrSkipped      = errors.New("the run's latest checkpoint was not kept")
	ErrCorrupt      = errors.New("the run's checkpoint is damaged")
	ErrRevisionGone = errors.New("the source revision is gone from the repository")
)

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Checkpoint is the record of a run's workspace after one of its writer
// executions.
type Checkpoint struct {
	// Execution is the execution ref whose end the checkpoint follows.
	Execution string `json:"execution"`
	// Base is the run's source revision; Commit the checkpoint commit on
	// the run's branch (Base itself when the workspace holds no change).
	Base   string `json:"base"`
	Commit string `json:"commit,omitempty"`
	// Ref, when set, is the hidden ref of the remote Commit was pushed
	// to; otherwise Bundle holds Commit's history after Base (empty when
	// Commit is Base).
	Ref    string `json:"ref,omitempty"`
	Bundle []byte `json:"-"`
	// Skipped, when set, says why no checkpoint was kept after Execution.
	Skipped string `json:"skipped,omitempty"`
}

// Encode is the checkpoint as kept in the ledger: its JSON header, a
// newline, and the bundle's bytes.
func (c Checkpoint) Encode() []byte {
	head, _ := json.Marshal(c)
	out := make([]byte, 0, len(head)+1+len(c.Bundle))
	out = append(append(head, '\n'), c.Bundle...)
	return out
}

// Decode reads a checkpoint Encode made; anything else is ErrCorrupt.
func Decode(data []byte) (Checkpoint, error) {
	var c Checkpoint
	head, bundle, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return c, fmt.Errorf("%w: no header", ErrCorrupt)
	}
	if err := json.Unmarshal(head, &c); err != nil {
		return c, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if c.Skipped == "" && (!shaRE.MatchString(c.Base) || !shaRE.MatchString(c.Commit)) {
		return c, fmt.Errorf("%w: base %q, commit %q", ErrCorrupt, c.Base, c.Commit)
	}
	if len(bundle) > 0 {
		c.Bundle = bundle
	}
	return c, nil
}

// ErrTooLarge is a checkpoint whose bundle is over the keeper's MaxBytes.
var ErrTooLarge = errors.New("the checkpoint is too large")

// SkipReason is the sentence a skipped checkpoint records, which the
// run's tenant may read: it names the bound that was passed, or a nested
// repository's path in the workspace, and never quotes what a host
// program printed (that goes to the server's log).
func SkipReason(err error) string {
	var why string
	switch {
	case errors.Is(err, ErrTooLarge):
		why = "the checkpoint is " + strings.TrimPrefix(detail(err, ErrTooLarge), ": ")
	case errors.Is(err, workspace.ErrTooLarge):
		why = "the workspace is over what the server records (" + strings.TrimPrefix(detail(err, workspace.ErrTooLarge), ": ") + ")"
	case errors.Is(err, workspace.ErrNestedRepository):
		why = "the workspace holds a nested git repository" + detail(err, workspace.ErrNestedRepository) + ", which the server does not record; remove it or list it in .gitignore"
	case errors.Is(err, workspace.ErrChanged):
		why = "the workspace changed while it was recorded"
	case errors.Is(err, context.DeadlineExceeded):
		why = "recording the workspace took too long"
	default:
		why = "the workspace could not be recorded (the server's log says why)"
	}
	return why
}

// detail is what err says after its sentinel's own text: the part the
// host itself wrote (a bound, a path of the workspace).
func detail(err, sentinel error) string {
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()); i >= 0 {
		s = s[i+len(sentinel.Error()):]
		if j := strings.Index(s, ": "+workspace.ErrGit.Error()); j >= 0 {
			s = s[:j]
		}
		return s
	}
	return ""
}
