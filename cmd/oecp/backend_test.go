package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/protocol"
)

func TestNewBackendSelectsClusterBackends(t *testing.T) {
	for _, c := range []struct {
		cfg  backendConfig
		caps string
	}{
		{backendConfig{kind: "fixture", tenancy: "isolated"}, `{"graphProfiles":[],"logs":false,"agentAttach":false}`},
		{backendConfig{kind: "default", store: "memory", tenancy: "shared"}, `{"graphProfiles":["openengine.graph.full/v1","openengine.graph.single-worker/v1"],"logs":true,"agentAttach":true}`},
	} {
		b, release, err := newBackend(c.cfg, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		_, fixture := b.(*cluster.Backend)
		_, capsuled := b.(*capsule.Backend)
		if fixture != (c.cfg.kind == "fixture") || capsuled != (c.cfg.kind == "default") {
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
	// The default store is SQLite in the data directory, which one
	// process at a time may own.
	dir := t.TempDir()
	cfg := backendConfig{kind: "default", dataDir: dir, sync: "normal", tenancy: "isolated"}
	_, release, err := newBackend(cfg, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, _, err := newBackend(cfg, slog.Default()); err == nil || !strings.Contains(err.Error(), "in use by another oecp serve") {
		t.Fatalf("second open of %s: %v", dir, err)
	}
}
