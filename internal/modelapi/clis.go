package modelapi

import (
	"os"
	"path/filepath"
	"testing"
)

// The real coding-agent CLIs the tests run, as .ci/agent-clis pins them
// and .ci/install-agent-clis installs them: <dir>/<name>-<version>/ holds
// the npm package, <dir> being $OECP_AGENT_CLIS_DIR or
// <user cache dir>/oecp/agent-clis.
const (
	CodexOld      = "0.148.0"
	CodexNew      = "0.171.0"
	ClaudeVersion = "2.1.197"
)

// CodexVersions are the Codex versions the tests run against.
var CodexVersions = []string{CodexOld, CodexNew}

// CLI is the path of an installed CLI ("codex" or "claude-code" at
// version); without it the test skips, or fails when
// OECP_REQUIRE_AGENT_CLIS=1.
func CLI(t testing.TB, name, version string) string {
	t.Helper()
	dir := os.Getenv("OECP_AGENT_CLIS_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory for the agent CLIs: %v", err)
		}
		dir = filepath.Join(cache, "oecp", "agent-clis")
	}
	bin := name
	if name == "claude-code" {
		bin = "claude"
	}
	path := filepath.Join(dir, name+"-"+version, "node_modules", ".bin", bin)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("OECP_REQUIRE_AGENT_CLIS") == "1" {
			t.Fatalf("%s %s is not installed at %s (run .ci/install-agent-clis)", name, version, path)
		}
		t.Skipf("%s %s not installed (.ci/install-agent-clis; OECP_REQUIRE_AGENT_CLIS=1 makes this fail)", name, version)
	}
	return path
}
