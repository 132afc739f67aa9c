package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionNamesTheCommit: the version line names the VCS revision the
// build recorded, says when the checkout had uncommitted changes, and
// says "commit unknown" when nothing was recorded.
func TestVersionNamesTheCommit(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}},
			"oecp (devel), commit " + rev},
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}},
			"oecp v1.2.0, commit " + rev + " plus uncommitted changes"},
		{&debug.BuildInfo{}, "oecp (devel), commit unknown"},
		{nil, "oecp (devel), commit unknown"},
	} {
		if got := readBuild(tc.bi).String(); got != tc.want {
			t.Errorf("version line %q, want %q", got, tc.want)
		}
	}
}

// TestCLIVersionCommitOfTheBinary: a binary built in this checkout with
// VCS stamping (go build's default; this test asks for it, since GOFLAGS
// may turn it off) names the checkout's HEAD in `version` and in
// `version --json`.
func TestCLIVersionCommitOfTheBinary(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout with git installed: %v", err)
	}
	rev := strings.TrimSpace(string(head))
	bin := filepath.Join(t.TempDir(), "oecp")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(out), ", commit "+rev) {
		t.Fatalf("version printed %q (%v), want commit %s", out, err, rev)
	}
	out, err = exec.Command(bin, "version", "--json").Output()
	var v struct{ Commit string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Commit != rev {
		t.Fatalf("version --json printed %q (%v), want commit %s", out, err, rev)
	}
}
