package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/oecp/oecp/workspace"
)

// Restore makes the run's workspace the source revision plus cp (the
// source alone when cp is nil), checked out on branch: the clone this
// host already holds is reset to it, else a new clone is made and the
// checkpoint's commit fetched from its bundle or its hidden ref. Files the
// checkpoint does not hold and git does not ignore are removed (the work
// of an execution that did not end). A restore that fails leaves no
// workspace behind; its error wraps ErrSkipped, ErrCorrupt,
// ErrRevisionGone or workspace.ErrUnavailable. A skipped checkpoint keeps
// the workspace this host holds as it is, and is ErrSkipped on any other
// host.
func (k *Keeper) Restore(ctx context.Context, key string, src workspace.Source, branch string, cp *Checkpoint) error {
	if cp != nil && cp.Skipped != "" {
		if k.M.Prepared(key, src) {
			return nil
		}
		return fmt.Errorf("%w after %s: %s", ErrSkipped, cp.Execution, cp.Skipped)
	}
	err := k.M.Prepare(ctx, key, src, branch)
	if err == nil {
		err = k.reset(ctx, key, src, branch, cp)
	}
	if err == nil || ctx.Err() != nil {
		return err
	}
	if errors.Is(err, workspace.ErrRevisionNotFound) {
		err = fmt.Errorf("%w: %w", ErrRevisionGone, err)
	}
	if derr := k.M.Discard(context.WithoutCancel(ctx), key); derr != nil {
		k.Log.Warn("checkpoint: cannot remove a workspace that was not restored", "key", key, "err", derr)
	}
	return err
}

// reset makes the run's prepared workspace cp's commit (src's revision
// without one) on branch: the commit is fetched into the host git
// directory, and the work tree and the agents' git directory are made
// anew from it, so nothing an execution that did not end left behind
// stays.
func (k *Keeper) reset(ctx context.Context, key string, src workspace.Source, branch string, cp *Checkpoint) error {
	release, err := k.M.Gate(key).Acquire(ctx, true)
	if err != nil {
		return err
	}
	defer release()
	home, err := os.MkdirTemp("", "oecp-checkpoint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	g := k.M.HostGit(key, home)
	target := src.Revision
	if cp != nil {
		if cp.Base != src.Revision {
			return fmt.Errorf("%w: it is based on %s, the run's source revision is %s", ErrCorrupt, cp.Base, src.Revision)
		}
		target = cp.Commit
		if err := k.fetch(ctx, g, home, src.Repository, cp); err != nil {
			return err
		}
	}
	if err := k.M.Reset(ctx, key, home, src, branch, target); err != nil {
		return fmt.Errorf("%w: %v", workspace.ErrUnavailable, err)
	}
	return nil
}

// fetch brings cp's commit into the run's git directory, unless it is
// there already.
func (k *Keeper) fetch(ctx context.Context, g workspace.Git, dir, repository string, cp *Checkpoint) error {
	if has(ctx, g, cp.Commit) {
		return nil
	}
	switch {
	case cp.Ref != "":
		repo, ok := k.M.Repos().Lookup(repository)
		token, tok := repo.Token()
		if !ok || !tok {
			return fmt.Errorf("%w: %s is not served, or its token is not set", workspace.ErrUnavailable, repository)
		}
		remote := g
		remote.Token, remote.Remote = token, repo.URL
		if _, err := remote.Run(ctx, "fetch", "--no-tags", repo.URL, "+"+cp.Ref+":"+localRef); err != nil {
			return fmt.Errorf("%w: the hidden ref %s: %v", ErrCorrupt, cp.Ref, err)
		}
	case len(cp.Bundle) == 0:
		return fmt.Errorf("%w: no bundle for commit %s", ErrCorrupt, cp.Commit)
	default:
		file := filepath.Join(dir, "checkpoint.bundle")
		if err := os.WriteFile(file, cp.Bundle, 0o600); err != nil {
			return fmt.Errorf("%w: %v", workspace.ErrUnavailable, err)
		}
		if _, err := g.Run(ctx, "bundle", "verify", "--quiet", file); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if _, err := g.Run(ctx, "fetch", "--no-tags", "--quiet", file, "+"+localRef+":"+localRef); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	if !has(ctx, g, cp.Commit) {
		return fmt.Errorf("%w: commit %s is not in it", ErrCorrupt, cp.Commit)
	}
	return nil
}

// has reports whether the git directory holds commit.
func has(ctx context.Context, g workspace.Git, commit string) bool {
	code, err := g.Status(ctx, "cat-file", "-e", commit+"^{commit}")
	return err == nil && code == 0
}
