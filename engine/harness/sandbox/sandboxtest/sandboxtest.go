// Package sandboxtest gives tests the agent sandbox of this host, or says
// in one line why there is none.
package sandboxtest

import (
	"os"
	"testing"

	"github.com/oecp/oecp/engine/harness/sandbox"
)

// RequireEnv, set to 1, makes a host without the sandbox fail the tests
// that use it instead of letting them skip or run unconfined.
const RequireEnv = "OECP_REQUIRE_SANDBOX"

// Host returns a sandbox for cfg, or nil (agents then run unconfined, and
// the test logs why) where this host cannot confine agents; under
// OECP_REQUIRE_SANDBOX=1 that fails the test instead.
func Host(t testing.TB, cfg sandbox.Config) *sandbox.Host {
	t.Helper()
	return open(t, cfg, func(err error) { t.Logf("agents run unconfined: %v", err) })
}

// Require returns a sandbox for cfg or skips the test with one line
// (fails it under OECP_REQUIRE_SANDBOX=1).
func Require(t testing.TB, cfg sandbox.Config) *sandbox.Host {
	t.Helper()
	return open(t, cfg, func(err error) { t.Skipf("needs the agent sandbox: %v", err) })
}

// open returns a sandbox for cfg; where this host has none it fails the
// test under OECP_REQUIRE_SANDBOX=1, else hands the reason to without and
// returns nil.
func open(t testing.TB, cfg sandbox.Config, without func(error)) *sandbox.Host {
	t.Helper()
	h, err := sandbox.New(cfg)
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s=1 but %v", RequireEnv, err)
		}
		without(err)
		return nil
	}
	t.Cleanup(h.Close)
	return h
}

// ServeFlags are the flags a test's `oecp serve --harness` needs on this
// host: none where agents can be confined, else --agent-unconfined (the
// test logs why), so that a machine without the sandbox's programs still
// runs the test; under OECP_REQUIRE_SANDBOX=1 a host without the sandbox
// fails the test instead.
func ServeFlags(t testing.TB) []string {
	t.Helper()
	if Host(t, sandbox.Config{}) == nil {
		return []string{"--agent-unconfined"}
	}
	return nil
}
