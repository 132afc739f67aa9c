package capsule

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/gittest"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/workspace"
	"github.com/oecp/oecp/workspace/checkpoint"
)

// checkpointHost is one server's checkpointing workspaces over remote.
func checkpointHost(t *testing.T, r *gittest.Remote, maxBytes int64) checkpointed {
	t.Helper()
	b, _ := json.Marshal(map[string]workspace.Repo{"acme/app": {URL: r.Dir}})
	repos, err := workspace.ParseRepos("repos.json", b)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	m := workspace.NewManager(t.TempDir(), repos, time.Hour, log)
	t.Cleanup(m.Close)
	return checkpointed{workspaces{m: m}, &checkpoint.Keeper{M: m, MaxBytes: maxBytes, Log: log}}
}

// TestRestoreFailuresSayWhy: a workspace that cannot be rebuilt on
// another server is a runs.RestoreError whose reason, the one the run's
// log gives the tenant, names the cause and nothing of the host: a
// checkpoint over the limit, a damaged one, a vanished source revision.
func TestRestoreFailuresSayWhy(t *testing.T) {
	ctx := context.Background()
	r := gittest.NewRemote(t)
	rev := r.Commit("tmp.txt", "soon gone\n", "temporary")
	r.Push("refs/heads/tmp")
	src := runs.Source{Repository: "acme/app", Branch: "tmp", Revision: rev}
	small := checkpointHost(t, r, 16)
	if err := small.Prepare(ctx, "alice", "r", src); err != nil {
		t.Fatal(err)
	}
	p, _ := small.m.Paths(workspace.Key("alice", "r"))
	r.Git(p.Workspace, "rm", "--quiet", "tmp.txt") // a change to checkpoint
	oversized := small.Checkpoint(ctx, "alice", "r", src, "r/a/1")
	big := checkpointHost(t, r, checkpoint.DefaultMaxBytes)
	kept := big.Checkpoint(ctx, "alice", "r", src, "r/a/1") // no workspace there: not kept either

	cases := []struct {
		name   string
		record []byte
		why    string
	}{
		{"oversized", oversized, "its latest checkpoint was not kept"},
		{"never made", kept, "its latest checkpoint was not kept"},
		{"damaged", []byte("not a checkpoint"), "its checkpoint is damaged"},
	}
	for _, c := range cases {
		err := checkpointHost(t, r, checkpoint.DefaultMaxBytes).Restore(ctx, "alice", "r", src, c.record)
		var re *runs.RestoreError
		if !errors.As(err, &re) || !strings.HasPrefix(re.Why, c.why) || strings.Contains(re.Why, r.Dir) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	r.Git(r.Dir, "update-ref", "-d", "refs/heads/tmp")
	r.Git(r.Dir, "reflog", "expire", "--expire=now", "--all")
	r.Git(r.Dir, "gc", "--quiet", "--prune=now")
	err := checkpointHost(t, r, checkpoint.DefaultMaxBytes).Restore(ctx, "alice", "r", src, nil)
	var re *runs.RestoreError
	if !errors.As(err, &re) || re.Why != "the source revision is gone from the repository" {
		t.Fatalf("vanished revision: %v", err)
	}
}
