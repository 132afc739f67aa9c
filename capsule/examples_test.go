package capsule_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/verifier"
)

// example is one examples/<name>.json graph with the root input of its
// sidecar examples/<name>.input.json.
type example struct {
	name  string
	graph []byte
	input string
}

func loadExamples(t testing.TB) []example {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "examples", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, p := range paths {
		if strings.HasSuffix(p, ".input.json") {
			continue
		}
		g, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		in, err := os.ReadFile(strings.TrimSuffix(p, ".json") + ".input.json")
		if err != nil {
			t.Fatalf("%s has no input sidecar: %v", p, err)
		}
		out = append(out, example{name: strings.TrimSuffix(filepath.Base(p), ".json"), graph: g, input: strings.TrimSpace(string(in))})
	}
	if len(out) < 4 {
		t.Fatalf("found %d examples, want at least 4", len(out))
	}
	return out
}

// TestExamples verifies every examples/*.json with the production verifier
// and the built-in workers, then runs it through the real backend with its
// sidecar input to a succeeded terminal result.
func TestExamples(t *testing.T) {
	reg, _, err := capsule.Registries(nil)
	if err != nil {
		t.Fatal(err)
	}
	v := verifier.New(reg)
	for _, ex := range loadExamples(t) {
		t.Run(ex.name, func(t *testing.T) {
			g, err := graph.Decode(ex.graph)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if r := v.Verify(g); !r.OK() {
				t.Fatalf("verify: %s %s", r.Status, mustJSON(t, r.Diagnostics))
			}
			e := start(t, capsule.Options{})
			run := e.apply(ex.graph, ex.input)
			got := e.waitFinished()
			if got.TerminalResult == nil || got.TerminalResult.Status != "succeeded" {
				t.Fatalf("terminal = %s; events:%s", mustJSON(t, got.TerminalResult), e.history(*run.RunID))
			}
			es := e.history(*run.RunID)
			if n := len(es.of(protocol.EventNodeBegin, "")); n == 0 {
				t.Fatalf("no node ran:%s", es)
			}
			t.Logf("%s → %s", ex.name, *got.TerminalResult.Output)
		})
	}
}
