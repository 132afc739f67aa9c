package cluster_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
)

func TestIsolatedTenantsNeverSeeEachOther(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	a, z := ctxFor("alpha"), ctxFor("zulu")
	if _, err := b.Apply(a, applyP(goldenGraph, "k", ptr(int64(0)))); err != nil {
		t.Fatal(err)
	}
	// zulu reads an empty cluster and cannot watch alpha's run.
	if got := getJSON(t, b, z); !strings.HasPrefix(got, `{"spec":null,"status":{"phase":"empty"`) {
		t.Fatal(got)
	}
	init, _ := b.Initialize(z)
	if init.Status.Phase != "empty" {
		t.Fatal("initialize leaked status")
	}
	_, err := b.Watch(z, protocol.WatchParams{RunID: ptr("run-1")})
	expectCode(t, err, protocol.NotFound)
	_, err = b.Watch(z, protocol.WatchParams{RunID: ptr("run-1"), FromCursor: ptr("cursor-1")})
	expectCode(t, err, protocol.NotFound)
	// zulu cannot change alpha's cluster.
	_, err = b.Stop(z, protocol.StopParams{Mode: "force", IfGeneration: 1, IdempotencyKey: "s"})
	expectCode(t, err, protocol.GenerationConflict)
	_, err = b.Update(z, protocol.UpdateParams{Suspended: ptr(true), IfGeneration: 0, IdempotencyKey: "u"})
	if errDetails(err) != `{"currentPhase":"empty"}` {
		t.Fatal(err)
	}
	_, err = b.Delete(z, protocol.DeleteParams{IfGeneration: 1, IfRunID: ptr("run-1"), IdempotencyKey: "d"})
	expectCode(t, err, protocol.GenerationConflict)
	// Idempotency keys are per tenant: zulu's "k" is a fresh key.
	r, err := b.Apply(z, applyP(goldenGraph, "k", ptr(int64(0))))
	if err != nil || r.Deduped || *r.RunID != "run-2" {
		t.Fatalf("%v %+v", err, r)
	}
	// A parked zulu watch never attaches to alpha's runs.
	g, _ := b.Get(a, protocol.GetParams{})
	if mustJSON(t, g.Status) != `{"phase":"running","observedGeneration":1,"currentRunId":"run-1","atCursor":"cursor-1","operational":{"labels":{},"logLevel":"info","dispatchState":"active","inFlight":0}}` {
		t.Fatal(mustJSON(t, g.Status))
	}
	// Engine calls are tenant-scoped too.
	if _, err := b.Ledger("test").Snapshot(bg, engine.RunRef{Tenant: b.TenantKey("nobody"), RunID: "run-1"}); !errors.Is(err, engine.ErrStale) {
		t.Fatal(err)
	}
	b.StartExecution("alpha", "e1")
	zb := cluster.New(cluster.Config{Store: b.Store(), AgentAttach: true})
	_, err = zb.AgentAttach(z, protocol.AgentAttachParams{Execution: "e1"})
	expectCode(t, err, protocol.NotFound)
}

func TestSharedTenancyServesOneCluster(t *testing.T) {
	b := cluster.NewFixture(cluster.Shared)
	if _, err := b.Apply(ctxFor("alpha"), applyP(goldenGraph, "k", ptr(int64(0)))); err != nil {
		t.Fatal(err)
	}
	r, err := b.Apply(ctxFor("zulu"), applyP(goldenGraph, "k", ptr(int64(0))))
	if err != nil || !r.Deduped {
		t.Fatalf("%v %+v", err, r)
	}
	drive(t, b, "anyone").mustDispatch()
	g, _ := b.Get(ctxFor("zulu"), protocol.GetParams{})
	if *g.AtCursor != "cursor-2" {
		t.Fatal(*g.AtCursor)
	}
}

func TestTenancyThroughConnections(t *testing.T) {
	b := cluster.NewFixture(cluster.Isolated)
	alpha := dial(t, b, identity.ConnectionIdentity{Principal: "a", Tenant: "alpha"})
	zulu := dial(t, b, identity.ConnectionIdentity{Principal: "z", Tenant: "zulu"})
	if got := zulu.call(`{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`); got != `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"sub-1","runId":null,"atCursor":null}}` {
		t.Fatal(got)
	}
	apply := `{"jsonrpc":"2.0","id":2,"method":"apply","params":{"graph":` + goldenGraph + `,"input":null,"idempotencyKey":"k"}}`
	alpha.send(apply)
	frames := []string{alpha.recv()}
	if !strings.Contains(frames[0], `"runId":"run-1"`) {
		t.Fatal(frames)
	}
	if got := zulu.call(`{"jsonrpc":"2.0","id":3,"method":"get","params":{}}`); got != `{"jsonrpc":"2.0","id":3,"result":{"spec":null,"status":{"phase":"empty","observedGeneration":null,"currentRunId":null,"atCursor":null},"atCursor":null}}` {
		t.Fatal(got)
	}
	if got := zulu.call(`{"jsonrpc":"2.0","id":4,"method":"watch","params":{"runId":"run-1"}}`); got != `{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"Run does not exist","data":{"code":"NOT_FOUND"}}}` {
		t.Fatal(got)
	}
	// zulu's own apply is the first event its parked watch sees.
	zulu.send(strings.Replace(apply, `"id":2`, `"id":5`, 1))
	var sawEvent bool
	for range 2 {
		f := zulu.recv()
		if strings.Contains(f, `"method":"event"`) {
			sawEvent = true
			if !strings.Contains(f, `"runId":"run-2"`) {
				t.Fatalf("zulu's watch saw another run: %s", f)
			}
		}
	}
	if !sawEvent {
		t.Fatal("no event")
	}
	var res struct {
		Result protocol.GetResult `json:"result"`
	}
	_ = json.Unmarshal([]byte(alpha.call(`{"jsonrpc":"2.0","id":6,"method":"get","params":{}}`)), &res)
	if *res.Result.Status.CurrentRunID != "run-1" {
		t.Fatal("alpha's cluster changed")
	}
}
