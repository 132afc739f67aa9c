package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
)

// writeHarness writes a harness file of content and returns its path.
func writeHarness(t *testing.T, content string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "harness.json")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRunHarnessesOverTheWire: run/harnesses answers the server's harness
// entries, each with its kind, the model catalogue and the default model;
// one entry is the default, of several none is; a server without a
// harness file offers none; params other than {} are refused like
// run/list's.
func TestRunHarnessesOverTheWire(t *testing.T) {
	codex := `{"name":"codex","kind":"codex","models":["gpt-5.6","gpt-5.6-sol","gpt-5.6-terra","gpt-5.6-luna"],"defaultModel":"gpt-5.6","default":%s}`
	claude := `{"name":"claude","kind":"command","models":["claude-haiku-4-5","claude-sonnet-5","claude-opus-5","claude-fable-5"],"defaultModel":"claude-sonnet-5","default":false}`
	for _, tc := range []struct {
		name, file, want string
	}{
		{"one", `{"codex":{"argv":["/bin/true"]}}`, `{"harnesses":[` + strings.Replace(codex, "%s", "true", 1) + `]}`},
		{"two", `{"codex":{"argv":["/bin/true"]},"claude":{"driver":"command","argv":["/bin/true"]}}`,
			`{"harnesses":[` + claude + `,` + strings.Replace(codex, "%s", "false", 1) + `]}`},
		{"none", "", `{"harnesses":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--store", "memory", "--agent-unconfined"}
			if tc.file != "" {
				args = append(args, "--harness", writeHarness(t, tc.file))
			}
			w := wiretest.StartProc(t, oecpBin, args...)
			for _, x := range []struct{ send, want string }{
				{`{"jsonrpc":"2.0","id":1,"method":"run/harnesses","params":{}}`, `{"jsonrpc":"2.0","id":1,"result":` + tc.want + `}`},
				{`{"jsonrpc":"2.0","id":2,"method":"run/harnesses","params":{"x":1}}`, `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params","data":{"code":"SCHEMA_VIOLATION"}}}`},
			} {
				if err := w.Send(x.send); err != nil {
					t.Fatal(err)
				}
				got, err := w.Recv()
				if err != nil {
					t.Fatalf("%v\n%s", err, w.Stderr)
				}
				if got != x.want {
					t.Fatalf("%s answered\n%s\nwant\n%s", x.send, got, x.want)
				}
			}
		})
	}
	// The addition leaves the protocol's own surface as it was.
	if len(protocol.Methods) != 19 || protocol.Registry[len(protocol.Registry)-1].Name != protocol.MethodRunHarnesses {
		t.Fatalf("the protocol surface changed: %d methods", len(protocol.Methods))
	}
}

// TestCLIRunSubmitChoosesTheServersHarness: without --harness (and
// without --runtime) run submit builds the plan on the server's only
// harness entry and the run succeeds on it.
func TestCLIRunSubmitChoosesTheServersHarness(t *testing.T) {
	h := startTemplateHost(t, "claude")
	r := oecp(t, h.srv, "run", "submit", "--template", "single-worker", "--task", "Add a CHANGE.md", "--source", h.source, "--id", "chosen-1", "--watch", "--timestamps=false")
	expect(t, r, 0, []string{"run chosen-1 succeeded\n"}, nil)
}

// TestCLIRunSubmitHarnessNotOffered: with several harness entries and no
// --harness, run submit names them and the flag, and submits nothing (run
// harnesses lists them); a --harness, or a --model, the server does not
// offer is refused before submitting, naming what it offers.
func TestCLIRunSubmitHarnessNotOffered(t *testing.T) {
	two := startServer(t, "--harness", writeHarness(t, `{"codex":{"argv":["/bin/true"]},"claude":{"driver":"command","argv":["/bin/true"]}}`))
	r := oecp(t, two, "run", "submit", "--template", "single-worker", "--task", "x", "--source", testSource)
	expect(t, r, 2, nil, []string{"the server offers the harnesses claude, codex: choose one with --harness NAME"})
	expect(t, oecp(t, two, "run", "harnesses"), 0, []string{
		"HARNESS  KIND     DEFAULT  DEFAULT MODEL    MODELS\n",
		"claude   command  no       claude-sonnet-5  claude-haiku-4-5, claude-sonnet-5, claude-opus-5, claude-fable-5\n",
		"codex    codex    no       gpt-5.6          gpt-5.6, gpt-5.6-sol, gpt-5.6-terra, gpt-5.6-luna\n"}, nil)

	one := startServer(t, "--harness", writeHarness(t, `{"codex":{"argv":["/bin/true"]}}`))
	r = oecp(t, one, "run", "submit", "--template", "single-worker", "--task", "x", "--source", testSource, "--harness", "claude", "--id", "not-offered")
	expect(t, r, 1, nil, []string{"--harness claude: the server does not offer it; it offers codex", "--harness NAME"})
	r = oecp(t, one, "run", "submit", "--template", "single-worker", "--task", "x", "--source", testSource, "--model", "verifier=gpt-5.6-sol", "--model", "gpt-4o", "--id", "not-offered")
	expect(t, r, 1, nil, []string{`--model gpt-4o: the server's harness codex does not offer "gpt-4o"; it offers gpt-5.6, gpt-5.6-sol, gpt-5.6-terra, gpt-5.6-luna`})
	for _, srv := range []*testServer{two, one} {
		var list struct{ Runs []json.RawMessage }
		if r := oecp(t, srv, "run", "list", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || list.Runs == nil || len(list.Runs) != 0 {
			t.Fatalf("a refused submission left a run, or the list is not JSON: %+v", r)
		}
	}

	none := startServer(t)
	r = oecp(t, none, "run", "submit", "--template", "single-worker", "--task", "x", "--source", testSource)
	expect(t, r, 1, nil, []string{"the server offers no harness", "oecp serve --harness FILE"})
	expect(t, oecp(t, none, "run", "harnesses"), 0, []string{"the server offers no harness"}, nil)
}

// TestChooseHarnessOfAnOlderServer: a server that answers run/harnesses
// with -32601 gets the request for --runtime or --harness, as before the
// method; a --harness is then left to the server to judge.
func TestChooseHarnessOfAnOlderServer(t *testing.T) {
	c := newCLI("run submit", "run submit", "", io.Discard, io.Discard, false, false)
	old := func() *offer {
		return &offer{ask: func() (*client.RunHarnessesResult, error) {
			return nil, &client.Error{Code: protocol.CodeMethodNotFound, Message: protocol.MsgMethodNotFound}
		}}
	}
	if _, err := c.chooseHarness(old()); err == nil || !strings.Contains(err.Error(), "give the runtime plan with --runtime FILE, or build one with --harness codex|claude") {
		t.Fatalf("choice on an older server: %v", err)
	}
	if err := c.checkHarness(old(), "claude"); err != nil {
		t.Fatalf("--harness on an older server: %v", err)
	}
}

// TestCLIRunEndsOnProviderFailure: a software-change run whose reviewers'
// provider refuses the key (401), cannot be reached (the CLI's own
// retries run out), or cannot be reached while the CLI stays silent (the
// server's --agent-stall-timeout) ends failed with that cause after the
// first review, not in another round: the watch shows the reviewer's own
// last line and the run's reason, and no repair runs.
func TestCLIRunEndsOnProviderFailure(t *testing.T) {
	for _, tc := range []struct {
		mode, reason, line, log string
		flags                   []string
	}{
		{"401", "_refused", "failed (refusal: authentication_required); last line: ", "unexpected status 401 Unauthorized", nil},
		{"unreachable", "_crashed", "failed (crash: declared_failure); last line: Codex provider failure: stream disconnected before completion",
			"Codex provider failure: stream disconnected before completion: error sending request for url (http://127.0.0.1:9/v1/responses)", nil},
		{"silent", "_timed_out", "failed (timeout: declared_failure); last line: no output from the agent for 1s: turn ended (--agent-stall-timeout)",
			"no output from the agent for 1s", []string{"--agent-stall-timeout", "1s"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h := startAgentHostArgv(t, "codex", "testdata/provider-agent.sh", func(dir, agent string) []string {
				ok := filepath.Join(dir, "fine", "codex")
				script, err := os.ReadFile("testdata/template-agent.sh")
				if err == nil {
					err = os.MkdirAll(filepath.Dir(ok), 0o755)
				}
				if err == nil {
					err = os.WriteFile(ok, script, 0o755)
				}
				if err != nil {
					t.Fatal(err)
				}
				return []string{agent, tc.mode, ok}
			}, tc.flags...)
			r := oecp(t, h.srv, "run", "submit", "--template", "software-change", "--task", "Add a CHANGE.md", "--source", h.source,
				"--id", "provider-"+tc.mode, "--watch", "--timestamps=false")
			expect(t, r, 1, []string{"implement ended (execution provider-" + tc.mode + "/implement/1): succeeded", tc.line, "run provider-" + tc.mode + " failed"}, nil)
			if !strings.Contains(r.stdout, "acceptance"+tc.reason) && !strings.Contains(r.stdout, "code"+tc.reason) {
				t.Errorf("the run does not fail with a reviewer's %s:\n%s", tc.reason, r.stdout)
			}
			if strings.Contains(r.stdout, "repair started") || strings.Count(r.stdout, "acceptance started") != 1 {
				t.Errorf("another round ran:\n%s", r.stdout)
			}
			expect(t, oecp(t, h.srv, "run", "logs", "provider-"+tc.mode), 0, []string{tc.log}, nil)
		})
	}
}
