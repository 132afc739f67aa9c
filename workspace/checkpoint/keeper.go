package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/oecp/oecp/workspace"
)

// localRef is the ref of the host's git directory a bundle carries the
// checkpoint commit under.
const localRef = workspace.CheckpointRef

// Keeper takes and restores the checkpoints of the run directories of one
// workspace manager. MaxBytes bounds a bundle and Limits what a snapshot
// of the workspace reads (a larger checkpoint is skipped, with a log
// line); with Push, checkpoints go to a hidden ref of the repository's
// remote instead of into the ledger.
type Keeper struct {
	M        *workspace.Manager
	MaxBytes int64
	Limits   workspace.Limits
	Push     bool
	Log      *slog.Logger
}

// Take commits the run's workspace on its branch and returns the
// checkpoint of it after execution. It never fails: a checkpoint that
// cannot be made, or is over MaxBytes, is returned Skipped with the
// reason, which the server's log has too.
func (k *Keeper) Take(ctx context.Context, key string, src workspace.Source, branch, execution string) Checkpoint {
	cp, err := k.take(ctx, key, src, branch, execution)
	if err != nil {
		cp = Checkpoint{Execution: execution, Base: src.Revision, Skipped: SkipReason(err)}
		k.Log.WarnContext(ctx, "checkpoint skipped: the run's workspace cannot move to another server until its next checkpoint", "execution", execution, "reason", err)
		return cp
	}
	k.Log.InfoContext(ctx, "checkpoint", "execution", execution, "commit", cp.Commit, "bytes", len(cp.Bundle), "ref", cp.Ref)
	return cp
}

func (k *Keeper) take(ctx context.Context, key string, src workspace.Source, branch, execution string) (Checkpoint, error) {
	cp := Checkpoint{Execution: execution, Base: src.Revision}
	release, err := k.M.Gate(key).Acquire(ctx, true)
	if err != nil {
		return cp, err
	}
	defer release()
	home, err := k.M.GitHome()
	if err != nil {
		return cp, err
	}
	snap, err := k.M.Snapshot(ctx, key, home, workspace.Identity{Name: committerName, Email: committerEmail},
		"oecp: checkpoint after "+execution, k.Limits)
	if err != nil {
		return cp, err
	}
	if cp.Commit = snap.Commit; cp.Commit == cp.Base {
		return cp, nil
	}
	// The branch descends from the source revision: only the host's
	// snapshots and restores move it.
	g := k.M.HostGit(key, home)
	if k.Push {
		cp.Ref = HiddenRefPrefix + branch
		return cp, k.push(ctx, g, src.Repository, cp)
	}
	if snap.Pack != nil && snap.Parent == cp.Base {
		// The pack holds every object the commit adds to the source
		// revision: it is the bundle's.
		cp.Bundle, err = k.hostBundle(cp, snap.Pack)
		return cp, err
	}
	cp.Bundle, err = k.bundle(ctx, g, cp)
	return cp, err
}

// hostBundle is the bundle of cp whose pack, written by the host, holds
// every object from cp.Base to cp.Commit; refused past MaxBytes.
func (k *Keeper) hostBundle(cp Checkpoint, pack []byte) ([]byte, error) {
	header := bundleHeader(cp)
	if int64(len(header)+len(pack)) > k.MaxBytes {
		return nil, fmt.Errorf("%w: over the limit of %d bytes (--checkpoint-max-bytes)", ErrTooLarge, k.MaxBytes)
	}
	return append([]byte(header), pack...), nil
}

// bundleHeader is a git bundle's header (version 2): cp.Base as the one
// commit the bundle requires, cp.Commit as localRef.
func bundleHeader(cp Checkpoint) string {
	return "# v2 git bundle\n-" + cp.Base + "\n" + cp.Commit + " " + localRef + "\n\n"
}

// bundle packs the history from cp.Base to cp.Commit as a git bundle, the
// pack read as git writes it (one pack-objects) and refused as soon as
// the bundle passes MaxBytes: no more than that is ever held or written.
func (k *Keeper) bundle(ctx context.Context, g workspace.Git, cp Checkpoint) ([]byte, error) {
	header := bundleHeader(cp)
	tooLarge := fmt.Errorf("%w: over the limit of %d bytes (--checkpoint-max-bytes)", ErrTooLarge, k.MaxBytes)
	if int64(len(header)) >= k.MaxBytes {
		return nil, tooLarge
	}
	pack, err := g.OutputOf(ctx, cp.Commit+"\n^"+cp.Base+"\n", k.MaxBytes-int64(len(header)),
		"pack-objects", "--stdout", "--revs", "--thin", "--delta-base-offset", "-q")
	if errors.Is(err, workspace.ErrOutputLimit) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, err
	}
	return append([]byte(header), pack...), nil
}

// push sends cp.Commit to the hidden ref cp.Ref of the repository's
// remote, without hooks, over https (or to a local path) only.
func (k *Keeper) push(ctx context.Context, g workspace.Git, repository string, cp Checkpoint) error {
	repo, ok := k.M.Repos().Lookup(repository)
	if !ok {
		return fmt.Errorf("%s is not listed in the server's --repos file", repository)
	}
	token, ok := repo.Token()
	if !ok {
		return fmt.Errorf("the token variable %s of %s is not set on the server", repo.TokenEnv, repository)
	}
	g.Token, g.Remote = token, repo.URL
	_, err := g.Run(ctx, "-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c", "protocol.file.allow=always",
		"push", "--porcelain", "--no-verify", "--force", repo.URL, cp.Commit+":"+cp.Ref)
	return err
}
