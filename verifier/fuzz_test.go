package verifier_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
)

// FuzzVerify: for any decodable graph the verifier never panics (it would
// report an internal error), and returns a sorted, deterministic result.
func FuzzVerify(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(fixtureRoot, "verifier", "*", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files under testdata/oecp-v1 (%v)", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		var v struct{ Graph json.RawMessage }
		if json.Unmarshal(data, &v) == nil {
			f.Add([]byte(v.Graph))
		}
	}
	// Hostile graphs that used to take seconds (hostile_test.go); the
	// small ones only, so the seed corpus stays fast to replay.
	for _, c := range hostileCases() {
		if c.name == "map10x2" || c.name == "map1x1024" {
			f.Add(hostileJSON(f, c.root))
		}
	}
	reg := loadRegistry(f)
	v := verifier.New(verifier.Chain(reg, verifier.BuiltinRegistry{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := graph.Decode(data)
		if err != nil {
			return
		}
		r1 := v.Verify(g)
		r2 := v.Verify(g)
		b1, err1 := json.Marshal(r1)
		b2, err2 := json.Marshal(r2)
		if err1 != nil || err2 != nil || string(b1) != string(b2) {
			t.Fatalf("non-deterministic result:\n%s\n%s", b1, b2)
		}
		if r1.OK() != (len(r1.Diagnostics) == 0) {
			t.Fatalf("status %s with %d diagnostics", r1.Status, len(r1.Diagnostics))
		}
		for i, d := range r1.Diagnostics {
			if strings.Contains(d.Message, "internal error") {
				t.Fatalf("verifier panicked: %s", d.Message)
			}
			if i > 0 && graph.CompareDiagnostics(r1.Diagnostics[i-1], d) > 0 {
				t.Fatalf("diagnostics not sorted: %s", b1)
			}
		}
	})
}
