package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/oecp/oecp/capsule"
)

// TestDeliveryLinesNameThePullRequest: the pull request is shown by its
// address when the receipt has one, else by its number; the branch with
// its head's first 12 digits.
func TestDeliveryLinesNameThePullRequest(t *testing.T) {
	r := capsule.Receipt{Repository: "acme/app", Branch: "oecp/run-1", TargetBranch: "main",
		HeadRevision: "0123456789abcdef0123456789abcdef01234567", PullRequestID: "12", Outcome: "opened"}
	want := []string{"delivered: branch oecp/run-1 (head 0123456789ab) of acme/app", "pull request: #12 into main (opened)"}
	if got := deliveryLines(r); !slices.Equal(got, want) {
		t.Errorf("without an address: %q, want %q", got, want)
	}
	r.PullRequestURL, r.Outcome = "https://github.com/acme/app/pull/12", "merged"
	want[1] = "pull request: https://github.com/acme/app/pull/12 into main (merged)"
	if got := deliveryLines(r); !slices.Equal(got, want) {
		t.Errorf("with an address: %q, want %q", got, want)
	}
}

// TestWithDeliveryAddsAMember: "delivery" follows the server's members of
// a run/status result; without a receipt the result is left as it was.
func TestWithDeliveryAddsAMember(t *testing.T) {
	raw := json.RawMessage(`{"runId":"r","status":{"phase":"finished"}}`)
	r := &capsule.Receipt{Repository: "acme/app", PullRequestID: "3", PullRequestURL: "https://github.com/acme/app/pull/3"}
	got := withDelivery(raw, r)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(got, &m); err != nil || string(m["runId"]) != `"r"` {
		t.Fatalf("%s: %v", got, err)
	}
	var d capsule.Receipt
	if err := json.Unmarshal(m["delivery"], &d); err != nil || d != *r {
		t.Fatalf("delivery %s: %v", m["delivery"], err)
	}
	if string(got[:len(raw)-1]) != string(raw[:len(raw)-1]) {
		t.Errorf("the server's members were changed: %s", got)
	}
	if got := withDelivery(raw, nil); string(got) != string(raw) {
		t.Errorf("without a receipt: %s", got)
	}
}
