package cluster_test

import (
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/protocol"
)

// getEncoded is one get, with its result's stored encoding.
func getEncoded(t *testing.T, b *cluster.Backend, tenant string) (*protocol.GetResult, string) {
	t.Helper()
	g, err := b.Get(ctxFor(tenant), protocol.GetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if g.EncodedJSON() == nil || string(g.EncodedJSON()) != mustJSON(t, g) {
		t.Fatalf("stored encoding %s differs from the result %s", g.EncodedJSON(), mustJSON(t, g))
	}
	return g, string(g.EncodedJSON())
}

// TestGetIsEncodedOncePerCommit: gets share one encoded result until a
// commit changes the tenant's state, and then see the change at once.
func TestGetIsEncodedOncePerCommit(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	empty, emptyJSON := getEncoded(t, b, "a")
	if again, _ := getEncoded(t, b, "b"); again != empty {
		t.Fatal("tenants without state got different results")
	}
	if _, err := b.Apply(ctxFor("a"), applyP(goldenGraph, "k", nil)); err != nil {
		t.Fatal(err)
	}
	applied, appliedJSON := getEncoded(t, b, "a")
	if appliedJSON == emptyJSON || applied.Status.Phase != protocol.PhaseRunning {
		t.Fatalf("get after apply: %s", appliedJSON)
	}
	if again, _ := getEncoded(t, b, "a"); again != applied {
		t.Fatal("a get without a commit between encoded the state again")
	}
	if _, b2 := getEncoded(t, b, "b"); b2 != emptyJSON {
		t.Fatalf("another tenant sees %s", b2)
	}
	level := "warn"
	if _, err := b.Update(ctxFor("a"), protocol.UpdateParams{LogLevel: &level, IfGeneration: 1, IdempotencyKey: "u"}); err != nil {
		t.Fatal(err)
	}
	if updated, _ := getEncoded(t, b, "a"); updated == applied || updated.Status.Operational.LogLevel != "warn" {
		t.Fatalf("get after update: %s", mustJSON(t, updated))
	}
}
