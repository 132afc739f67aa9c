package conformance

import (
	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/server"
)

// fixtureBackend is a fresh `--backend fixture` instance.
func fixtureBackend() server.Backend { return cluster.NewFixture(cluster.Isolated) }
