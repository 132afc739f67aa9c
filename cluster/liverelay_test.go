package cluster_test

import (
	"context"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store/postgres"
	"github.com/oecp/oecp/store/postgres/pgtest"
)

// Two replicas on one database: a log line published on one reaches the
// logs subscribers of the other.
func TestLiveLogsReachTheOtherReplica(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	var bs []*cluster.Backend
	for range 2 {
		st, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		b := cluster.New(cluster.Config{Store: st, Engine: true, Logs: true, AgentAttach: true})
		t.Cleanup(func() { _ = b.Close() })
		bs = append(bs, b)
	}
	if _, err := bs[0].Apply(ctxFor("a"), applyP(goldenGraph, "k1", nil)); err != nil {
		t.Fatal(err)
	}
	sub, err := bs[1].Logs(ctxFor("a"), protocol.LogsParams{})
	if err != nil {
		t.Fatal(err)
	}
	l := bs[0].Ledger("p")
	runs, err := l.Running(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("running %v %v", runs, err)
	}
	l.Log(runs[0], "run-1/a/1", "info", "hello")
	n, err := sub.Stream.Next(testkit.Bounded(t))
	if err != nil || string(n.Rest) != `,"record":{"level":"info","target":"run-1/a/1","message":"hello"}` {
		t.Fatalf("%s %v", n.Rest, err)
	}
}
