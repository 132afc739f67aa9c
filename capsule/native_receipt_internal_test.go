package capsule

import (
	"encoding/json"
	"testing"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/workspace"
)

// TestPullRequestURLOnlyOnTheForgesHost: the address is known for a git
// URL on the forge's host in each spelling git takes, and not for a local
// path, another host or a URL with a port on another scheme.
func TestPullRequestURLOnlyOnTheForgesHost(t *testing.T) {
	for _, tc := range []struct{ gitURL, host, want string }{
		{"https://github.com/acme/app.git", "github.com", "https://github.com/acme/app/pull/7"},
		{"https://x-access-token@github.com/acme/app", "github.com", "https://github.com/acme/app/pull/7"},
		{"git@github.com:acme/app.git", "github.com", "https://github.com/acme/app/pull/7"},
		{"ssh://git@ghe.acme.test:2222/acme/app", "ghe.acme.test", "https://ghe.acme.test/acme/app/pull/7"},
		{"https://GitHub.com/acme/app", "github.com", "https://github.com/acme/app/pull/7"},
		{"/srv/git/app.git", "github.com", ""},
		{"file:///srv/git/app.git", "github.com", ""},
		{"https://gitlab.example/acme/app", "github.com", ""},
	} {
		if got := PullRequestURL(tc.gitURL, tc.host, "acme/app", "7"); got != tc.want {
			t.Errorf("PullRequestURL(%q, %q) = %q, want %q", tc.gitURL, tc.host, got, tc.want)
		}
	}
}

// TestReceiptRecordRoundTrip: a delivery's verifier outcome is logged as
// one receipt record with the run's branch, which ParseReceiptRecord
// reads back; an error outcome logs none.
func TestReceiptRecordRoundTrip(t *testing.T) {
	var lines []string
	sinks := worker.Sinks{Log: func(_, msg string) { lines = append(lines, msg) }}
	out, _ := json.Marshal(map[string]string{"version": "v1", "mode": "pr", "outcome": "opened", "repository": "acme/app",
		"targetBranch": "main", "headRevision": "0123456789abcdef0123456789abcdef01234567", "pullRequestId": "12"})
	recordReceipt(sinks, worker.Outcome{Status: "verifier", Output: out}, workspace.Repo{URL: "https://github.com/acme/app.git"}, "oecp/run-abc")
	recordReceipt(sinks, worker.Failed(worker.CodeCrash, worker.ReasonDeclaredFailure), workspace.Repo{URL: "/srv/app.git"}, "oecp/run-abc")
	if len(lines) != 1 {
		t.Fatalf("records %q, want one", lines)
	}
	r, ok := ParseReceiptRecord(lines[0])
	want := Receipt{Repository: "acme/app", Branch: "oecp/run-abc", TargetBranch: "main", HeadRevision: "0123456789abcdef0123456789abcdef01234567",
		PullRequestID: "12", PullRequestURL: "https://github.com/acme/app/pull/12", Mode: "pr", Outcome: "opened"}
	if !ok || r != want {
		t.Fatalf("parsed %+v %v from %q", r, ok, lines[0])
	}
	if _, ok := ParseReceiptRecord("delivery: pushed"); ok {
		t.Fatal("a delivery progress line parsed as a receipt")
	}
}
