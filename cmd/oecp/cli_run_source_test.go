package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
)

func TestParseSource(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	src, err := parseSource("acme/wid.gets@release/v1.2@x:" + rev)
	if err != nil || src != (client.RunSource{Repository: "acme/wid.gets", Branch: "release/v1.2@x", Revision: rev}) {
		t.Fatalf("parseSource = %+v, %v", src, err)
	}
	for _, bad := range []string{"", "acme/widgets@main", "acme@main:" + rev, "a/b/c@main:" + rev, "a/b@main:" + strings.ToUpper(rev)} {
		if _, err := parseSource(bad); err == nil {
			t.Errorf("parseSource(%q) accepted", bad)
		}
	}
}

func TestRepoFromURL(t *testing.T) {
	for url, want := range map[string]string{
		"https://github.com/acme/widgets.git":      "acme/widgets",
		"https://github.com/acme/widgets/":         "acme/widgets",
		"git@github.com:acme/widgets.git":          "acme/widgets",
		"ssh://git@host:2222/group/acme/widgets":   "acme/widgets",
		"file:///srv/git/widgets.git":              "git/widgets",
		"https://github.com/widgets":               "",
		"git@github.com:widgets":                   "",
		"https://github.com/acme/wid gets.git":     "",
		"https://example.com/acme/widgets.git?x=1": "",
	} {
		got, ok := repoFromURL(url)
		if (ok && got != want) || ok != (want != "") {
			t.Errorf("repoFromURL(%q) = %q, %v; want %q", url, got, ok, want)
		}
	}
}

// TestSubmissionKey: the default key depends on what the submission says,
// not on how its files are formatted, and an explicit run id is part of it.
func TestSubmissionKey(t *testing.T) {
	g, err := os.ReadFile(stepGraph)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, g); err != nil {
		t.Fatal(err)
	}
	sub := client.RunSubmission{Title: "t", Graph: g, InitialInput: json.RawMessage("null"), Runtime: json.RawMessage(`{"harness":"codex","provider":"openai","size":"tiny","nodes":{"work":{"kind":"agent","model":"gpt-5.6"}}}`)}
	sub.Source, _ = parseSource(testSource)
	k := submissionKey(sub, "")
	other := sub
	other.Graph = compact.Bytes()
	if submissionKey(other, "") != k {
		t.Error("reformatting the graph changed the key")
	}
	if submissionKey(sub, "my-run") == k {
		t.Error("an explicit run id did not change the key")
	}
	other.Title = "u"
	if submissionKey(other, "") == k {
		t.Error("another title gave the same key")
	}
	if !strings.HasPrefix(k, "oecp-cli-") || len(k) != len("oecp-cli-")+32 {
		t.Errorf("key %q", k)
	}
}

func TestAge(t *testing.T) {
	id := "019b0a3c-5f1e-7c2a-9d41-6b0e2f7a8c13"
	made, ok := client.RunIDTime(id)
	if !ok {
		t.Fatal("no time in", id)
	}
	for d, want := range map[time.Duration]string{-time.Second: "0s", 59 * time.Second: "59s", 90 * time.Second: "1m", 47 * time.Hour: "47h", 50 * time.Hour: "2d"} {
		if got := age(id, made.Add(d)); got != want {
			t.Errorf("age after %v = %q, want %q", d, got, want)
		}
	}
	if got := age("tick-1", made); got != "-" {
		t.Errorf("age of tick-1 = %q", got)
	}
}
