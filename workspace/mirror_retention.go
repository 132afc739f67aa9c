package workspace

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// shaRE matches a full object id (SHA-1 or SHA-256).
var shaRE = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// names returns the names of the mirrors on disk.
func (ms *mirrors) names() []string {
	dirs, _ := filepath.Glob(filepath.Join(ms.dir, "*"+mirrorExt))
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		out = append(out, strings.TrimSuffix(filepath.Base(d), mirrorExt))
	}
	return out
}

// release drops the run ref ref from every mirror (the run's directory is
// gone), and removes a mirror its repository file no longer serves
// (served is false for its name) once no run borrows from it.
func (ms *mirrors) release(ctx context.Context, ref string, served func(string) bool) {
	for _, name := range ms.names() {
		ms.tidy(ctx, name, func(r string) bool { return r != ref }, served(name))
	}
}

// sweep is the mirrors' retention, run at startup: in every mirror it
// drops the run refs of runs whose directory is gone (live lists the
// refs of those still there, read under the mirror's lock, after any run
// being prepared made its directory), removes leftovers of mirrors being
// made, a half-made mirror, and a mirror no longer served that no run
// borrows from; what stays gets git's automatic maintenance.
func (ms *mirrors) sweep(ctx context.Context, live func() map[string]bool, served func(string) bool) {
	for _, name := range ms.names() {
		if strings.Contains(name, tmpInfix) {
			continue
		}
		ms.tidy(ctx, name, func(r string) bool { return live()[r] }, served(name))
	}
}

// tidy, under the mirror's lock, deletes its run refs that keep says
// not to keep, and removes the mirror when it is not served and no run
// ref is left; a mirror that stays and lost refs gets git's automatic
// maintenance. Only waiting for the lock and the maintenance stop when
// ctx ends: the rest is quick, and done.
func (ms *mirrors) tidy(ctx context.Context, name string, keep func(string) bool, served bool) {
	unlock, err := ms.lock(ctx, name)
	if err != nil {
		return
	}
	defer unlock()
	dir := ms.path(name)
	stale, _ := filepath.Glob(filepath.Join(ms.dir, name+mirrorExt+tmpInfix+"*"))
	for _, d := range stale {
		_ = os.RemoveAll(d)
	}
	refs, err := readRunRefs(dir)
	if err != nil {
		ms.log.Warn("workspace: cannot read a mirror's run refs", "mirror", name, "err", err)
		return
	}
	home, err := os.MkdirTemp("", "oecp-git-")
	if err != nil {
		ms.log.Warn("workspace: no home for git", "err", err)
		return
	}
	defer os.RemoveAll(home)
	g := Git{Dir: dir, Home: home}
	dropped := 0
	for ref := range refs {
		if keep(ref) {
			continue
		}
		if _, err := g.Run(context.WithoutCancel(ctx), "update-ref", "-d", ref); err != nil {
			ms.log.Warn("workspace: cannot drop a run ref of a mirror", "mirror", name, "err", err)
			continue
		}
		delete(refs, ref)
		dropped++
	}
	switch {
	case !complete(dir) || (!served && len(refs) == 0):
		if err := os.RemoveAll(dir); err != nil {
			ms.log.Warn("workspace: cannot remove a mirror", "mirror", name, "err", err)
			return
		}
		ms.log.Info("workspace: mirror removed", "mirror", name, "served", served)
	case dropped > 0:
		if _, err := g.Run(ctx, "gc", "--auto", "--quiet"); err != nil {
			ms.log.Warn("workspace: mirror maintenance failed", "mirror", name, "err", err)
		}
	}
}
