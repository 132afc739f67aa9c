package workspace_test

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/workspace"
)

// maxGitDirShare is the most of the mirror's object bytes a run's own
// git directory may hold: it borrows the history, so it holds little
// more than its index and refs.
const maxGitDirShare = 0.05

// On a repository whose history is large and whose tree is small, each
// run's own git directory holds under 5% of the mirror's object bytes.
func TestRunGitDirHoldsLittleOfTheHistory(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "history.git")
	head := gittest.WriteHistory(t, remote, 16, 128<<10)
	root := t.TempDir()
	m := workspace.NewManager(root, repos(t, map[string]workspace.Repo{"acme/app": {URL: "file://" + remote}}), time.Hour, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	h := &host{t: t, root: root, m: m, remote: gittest.NewRemote(t)}
	for _, run := range []string{"run-1", "run-2"} {
		p := h.prepare(run, head)
		mirror := testkit.TreeBytes(t, filepath.Join(h.mirror(), "objects"))
		own := testkit.TreeBytes(t, p.Git)
		if mirror < 16*128<<10 {
			t.Fatalf("the mirror's objects hold %d bytes: not the whole history", mirror)
		}
		if share := float64(own) / float64(mirror); share >= maxGitDirShare {
			t.Fatalf("%s: its git directory holds %d bytes, %.1f%% of the mirror's %d", run, own, 100*share, mirror)
		}
		t.Logf("%s: git directory %d bytes, mirror objects %d bytes", run, own, mirror)
	}
}
