package nativegraph_test

import (
	"os"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/nativegraph"
)

// FuzzCheck applies the native rules to any graph that decodes: Check
// never panics, and a second Check of the same graph says the same.
func FuzzCheck(f *testing.F) {
	for _, path := range []string{agentsExample, nativeExample, v1Example} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := graph.Decode(data)
		if err != nil {
			return
		}
		_ = nativegraph.IsNative(g)
		res, err := nativegraph.Check(g)
		again, err2 := nativegraph.Check(g)
		if (err == nil) != (err2 == nil) || res.OK() != again.OK() {
			t.Fatalf("Check changed its mind: %v %v / %v %v", res.OK(), err, again.OK(), err2)
		}
	})
}
