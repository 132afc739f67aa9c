package runs_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/store/sqlite"
)

// supervise runs an engine over b until the returned stop is called,
// which fails t when the engine does not return.
func supervise(t testing.TB, b *runs.Backend) (stop func()) {
	sup := engine.New(b.Ledger("test-owner"), worker.NewRegistry(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(ctx) }()
	return func() { cancel(); testkit.Recv(t, done) }
}

// listed is the run ids of the tenant's inventory, in its order.
func listed(t *testing.T, b *runs.Backend, tenant string) []string {
	t.Helper()
	res, err := b.List(as(tenant))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range res.Runs {
		ids = append(ids, r.RunID)
	}
	return ids
}

// TestUpgradeMovesLegacyIndexes: the run indexes of a store an earlier
// release wrote (bucket records, wide sub-indexes, entries left where the
// layouts before put them) move into the store's indexes when a backend
// upgrades the store: every run is listed in the same order, the
// unfinished runs are supervised to their end, retention deletes the
// finished runs, and no record of the earlier layout is left.
func TestUpgradeMovesLegacyIndexes(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Dir: t.TempDir(), Sync: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	newBackend := func() *runs.Backend {
		return runs.New(runs.Config{Store: st, Agents: newFakeAgents(), Log: slog.New(slog.DiscardHandler)})
	}
	b := newBackend()
	stop := supervise(t, b)
	finished := map[string][]string{"alice": {"a1", "a2", "a3", "a4"}, "bob": {"b1", "b2"}}
	for tenant, ids := range finished {
		for _, id := range ids {
			if _, err := b.Submit(as(tenant), id, oneStep("k-"+id, "echo")); err != nil {
				t.Fatal(err)
			}
			waitFinished(t, b, as(tenant), id)
		}
	}
	stop()
	unfinished := map[string][]string{"alice": {"a5", "a6", "a7"}, "bob": {"b3"}}
	for tenant, ids := range unfinished {
		for _, id := range ids {
			if _, err := b.Submit(as(tenant), id, oneStep("k-"+id, "echo")); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := map[string][]string{"alice": listed(t, b, "alice"), "bob": listed(t, b, "bob")}
	b.Close()
	if len(before["alice"]) != 7 || len(before["bob"]) != 3 {
		t.Fatalf("listed before: %v", before)
	}
	tks := []string{b.TenantKey("alice"), b.TenantKey("bob")}

	if err := runs.WriteLegacyIndexes(ctx, st); err != nil {
		t.Fatal(err)
	}
	if n, err := runs.LegacyRecords(ctx, st, tks...); err != nil || n == 0 {
		t.Fatalf("legacy records written: %d, %v", n, err)
	}
	b = newBackend()
	t.Cleanup(b.Close)
	if got := listed(t, b, "alice"); len(got) != 0 {
		t.Fatalf("the legacy layout is read without an upgrade: %v", got)
	}
	for range 2 { // the second upgrade finds nothing to do
		if err := b.Upgrade(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := runs.LegacyRecords(ctx, st, tks...); err != nil || n != 0 {
		t.Fatalf("legacy records left: %d, %v", n, err)
	}
	for tenant, want := range before {
		if got := listed(t, b, tenant); !slices.Equal(got, want) {
			t.Fatalf("%s's runs after the upgrade: %v, want %v", tenant, got, want)
		}
	}
	stop = supervise(t, b)
	defer stop()
	for tenant, ids := range unfinished {
		for _, id := range ids {
			waitFinished(t, b, as(tenant), id)
		}
	}
	if n, err := b.Compact(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 10 {
		t.Fatalf("Compact = %d, %v; want every one of the 10 runs", n, err)
	}
	for tenant := range before {
		if got := listed(t, b, tenant); len(got) != 0 {
			t.Fatalf("%s's runs after retention: %v", tenant, got)
		}
	}
}
