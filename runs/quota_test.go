package runs_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs"
)

// TestActiveRunsPerTenant: past the tenant's quota of unfinished runs a
// new submission is SERVER_BUSY, while a replay and another tenant's run
// are admitted; once runs finish, their places come back.
func TestActiveRunsPerTenant(t *testing.T) {
	b := runs.New(runs.Config{Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler), MaxActivePerTenant: 2})
	defer b.Close()
	alice := as("alice")
	for _, id := range []string{"r1", "r2"} {
		if _, err := b.Submit(alice, id, oneStep("k-"+id, "echo")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Submit(alice, "r3", oneStep("k-r3", "echo")); errCode(err) != protocol.ServerBusy {
		t.Fatalf("third unfinished run: %v", err)
	}
	if res, err := b.Submit(alice, "r1", oneStep("k-r1", "echo")); err != nil || res.RunID != "r1" {
		t.Fatalf("replay at the quota: %v %v", res, err)
	}
	if _, err := b.Submit(as("bob"), "r3", oneStep("k-r3", "echo")); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	// A supervisor finishes the runs; then alice may submit again.
	sup := engine.New(b.Ledger("quota-test"), worker.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(ctx) }()
	defer func() { cancel(); testkit.Recv(t, done) }()
	waitFinished(t, b, alice, "r1")
	waitFinished(t, b, alice, "r2")
	if _, err := b.Submit(alice, "r3", oneStep("k-r3", "echo")); err != nil {
		t.Fatalf("after two finished: %v", err)
	}
}
