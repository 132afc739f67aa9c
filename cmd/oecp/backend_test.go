package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/protocol"
)

func TestNewBackendSelectsClusterBackends(t *testing.T) {
	for _, c := range []struct {
		cfg  backendConfig
		caps string
	}{
		{backendConfig{kind: "fixture", tenancy: "isolated"}, `{"graphProfiles":[],"logs":false,"agentAttach":false}`},
		{backendConfig{kind: "default", tenancy: "shared"}, `{"graphProfiles":["openengine.graph.full/v1","openengine.graph.single-worker/v1"],"logs":true,"agentAttach":true}`},
	} {
		b, release, err := newBackend(c.cfg, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.(*cluster.Backend); !ok {
			t.Fatalf("%s: got %T", c.cfg.kind, b)
		}
		r, err := b.Initialize(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := protocol.Marshal(r.Capabilities)
		if string(got) != c.caps {
			t.Fatalf("%s: %s", c.cfg.kind, got)
		}
		release()
	}
	if _, _, err := newBackend(backendConfig{kind: "default", store: "sqlite", tenancy: "isolated"}, slog.Default()); err == nil {
		t.Fatal("--store sqlite accepted before the SQLite store exists")
	}
}
