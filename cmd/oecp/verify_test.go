package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var verifyFixtures = filepath.Join("..", "..", "testdata", "oecp-v1", "fixtures")

// vectorGraph writes the graph of a verifier vector to a temp file.
func vectorGraph(t *testing.T, vector string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(verifyFixtures, "verifier", vector))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Graph json.RawMessage `json:"graph"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "graph.json")
	if err := os.WriteFile(p, v.Graph, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runVerifyCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(append([]string{"verify"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVerifyCLI(t *testing.T) {
	registry := filepath.Join(verifyFixtures, "verifier", "registry.json")
	verified := vectorGraph(t, filepath.Join("positive", "basic.json"))
	rejected := vectorGraph(t, filepath.Join("negative", "parallel-write-conflict.json"))
	garbage := filepath.Join(t.TempDir(), "garbage.json")
	if err := os.WriteFile(garbage, []byte(`{"profile":"nope"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	badWorkers := filepath.Join(t.TempDir(), "workers.json")
	if err := os.WriteFile(badWorkers, []byte(`[{"worker":"x@1","bogus":1}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	validWorker := filepath.Join(verifyFixtures, "workers", "positive", "builtin-v1.json")
	invalidWorker := filepath.Join(t.TempDir(), "worker.json")
	{
		data, _ := os.ReadFile(filepath.Join(verifyFixtures, "workers", "negative", "endpoint.json"))
		var v struct{ Document json.RawMessage }
		_ = json.Unmarshal(data, &v)
		_ = os.WriteFile(invalidWorker, v.Document, 0o600)
	}

	tests := []struct {
		name       string
		args       []string
		code       int
		stdoutHas  string
		stderrHas  string
		singleJSON bool
	}{
		{"verified json", []string{"--graph", verified, "--registry", registry, "--json"}, exitOK, `"status":"verified"`, "", true},
		{"verified report", []string{"--graph", verified, "--registry", registry}, exitOK, "verified", "", false},
		{"rejected json", []string{"--graph", rejected, "--registry", registry, "--json"}, exitError, `"write_conflict"`, "", true},
		{"rejected report", []string{"--graph", rejected, "--registry", registry}, exitError, "parallel all branches have overlapping writes", "", false},
		{"builtin registry misses fixture workers", []string{"--graph", verified, "--json"}, exitError, "worker descriptor not found", "", true},
		{"undecodable graph", []string{"--graph", garbage}, exitUsage, "", garbage, false},
		{"missing graph", []string{"--graph", missing}, exitUsage, "", missing, false},
		{"missing registry", []string{"--graph", verified, "--registry", missing}, exitUsage, "", missing, false},
		{"serve's workers file as registry", []string{"--graph", ticker, "--registry", tickerWorkers}, exitOK, "verified", "", false},
		{"workers file needed", []string{"--graph", ticker}, exitError, "test.ticker@1", "", false},
		{"invalid workers file", []string{"--graph", ticker, "--registry", badWorkers}, exitUsage, "", "not a valid registry or workers file", false},
		{"valid worker", []string{"--worker", validWorker}, exitOK, "valid worker descriptor", "", false},
		{"valid worker json", []string{"--worker", validWorker, "--json"}, exitOK, `"valid":true`, "", true},
		{"invalid worker", []string{"--worker", invalidWorker}, exitError, "forbidden field", "", false},
		{"missing worker", []string{"--worker", missing}, exitUsage, "", missing, false},
		{"no flags", nil, exitUsage, "", "usage", false},
		{"both modes", []string{"--graph", verified, "--worker", validWorker}, exitUsage, "", "usage", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runVerifyCLI(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.stdoutHas) {
				t.Errorf("stdout %q lacks %q", stdout, tc.stdoutHas)
			}
			if !strings.Contains(stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderrHas)
			}
			if tc.singleJSON {
				dec := json.NewDecoder(strings.NewReader(stdout))
				var v any
				if err := dec.Decode(&v); err != nil {
					t.Fatalf("stdout is not JSON: %v", err)
				}
				if dec.More() {
					t.Fatalf("stdout holds more than one JSON document")
				}
			}
		})
	}
}

// The --json output is exactly the fixture's expected object.
func TestVerifyCLIMatchesVector(t *testing.T) {
	registry := filepath.Join(verifyFixtures, "verifier", "registry.json")
	for _, vec := range []string{"positive/join-first.json", "negative/cyclic-read.json"} {
		data, err := os.ReadFile(filepath.Join(verifyFixtures, "verifier", vec))
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Expected any }
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		_, stdout, _ := runVerifyCLI("--graph", vectorGraph(t, vec), "--registry", registry, "--json")
		var got any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(v.Expected)
		if !bytes.Equal(a, b) {
			t.Errorf("%s:\ngot  %s\nwant %s", vec, a, b)
		}
	}
}
