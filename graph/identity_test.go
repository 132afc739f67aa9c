package graph_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
)

func TestCanonicalJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":{"d":[3,{"z":null,"y":true}],"c":"x"}}`, `{"a":{"c":"x","d":[3,{"y":true,"z":null}]},"b":1}`},
		{`"<>&\u2028é\u0001\u007f\/"`, "\"<>&\u2028é\\u0001\u007f/\""},
		{`[1.0, 1.5, 1e21, 1e20, 0.00001, 1e-7, -0, 100]`, `[1.0,1.5,1e21,100000000000000000000.0,0.00001,1e-7,0,100]`},
		{`{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, tc := range cases {
		got, err := graph.CanonicalJSON(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	got, err := graph.CanonicalJSON(map[string]any{"z": 1, "a": "<"})
	if err != nil || string(got) != `{"a":"<","z":1}` {
		t.Errorf("Go value: %s %v", got, err)
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(method, params string) string {
		t.Helper()
		s, err := graph.Fingerprint(method, json.RawMessage(params))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := fp("apply", `{"graph":{"a":1},"input":null,"ifGeneration":0,"idempotencyKey":"k1"}`)
	if len(base) != 64 {
		t.Fatalf("fingerprint %q", base)
	}
	if fp("apply", `{"ifGeneration":0,"input":null,"graph":{"a":1},"idempotencyKey":"k2"}`) != base {
		t.Error("key order or idempotency key changed the fingerprint")
	}
	for name, other := range map[string]string{
		"method":        fp("plan", `{"graph":{"a":1},"input":null,"ifGeneration":0}`),
		"input omitted": fp("apply", `{"graph":{"a":1},"ifGeneration":0}`),
		"float":         fp("apply", `{"graph":{"a":1},"input":1.0,"ifGeneration":0}`),
	} {
		if other == base {
			t.Errorf("%s did not change the fingerprint", name)
		}
	}
	if fp("apply", `{"input":1}`) == fp("apply", `{"input":1.0}`) {
		t.Error("integer 1 and float 1.0 must differ")
	}
	typed := struct {
		Graph *graph.GraphSpec `json:"graph"`
	}{mustDecode(t, goldenSpec)}
	if _, err := graph.Fingerprint("apply", typed); err != nil {
		t.Fatal(err)
	}
}

func mustDecode(t testing.TB, s string) *graph.GraphSpec {
	t.Helper()
	g, err := graph.Decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const diffBase = `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"p@1","default":"deny"},
"root":{"kind":"seq","name":"root","state":{"kind":"null"},"promotedStatePaths":[["b"],["a"],["b"]],"children":[
 {"kind":"par","name":"par","state":{"kind":"null"},"promotedStatePaths":[],"join":{"kind":"all"},"branches":[
   {"kind":"step","name":"left","worker":"w@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1,"attempts":1},
   {"kind":"step","name":"right","worker":"w@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1,"attempts":1}]},
 {"kind":"choice","name":"route","state":{"kind":"null"},"promotedStatePaths":[],"branches":[
   {"when":{"kind":"all","guards":[{"kind":"in","value":{"name":"left","source":"error","field":null},"labels":["timeout"]},{"kind":"all","guards":[{"kind":"in","value":{"name":"right","source":"error"},"labels":["crash"]}]}]},
    "node":{"kind":"fail","name":"failed","reason":"broken"}}],
  "otherwise":{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}}]}}`

func TestIdentityNormalisation(t *testing.T) {
	id := func(s string) string {
		t.Helper()
		s, err := graph.Identity(mustDecode(t, s))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := id(diffBase)
	same := map[string]string{
		// Par branch order is covered with fixed bounds by the canonical fixtures;
		// with computed bounds it also reorders the acyclic witness.
		"promoted dedupe":      strings.Replace(diffBase, `[["b"],["a"],["b"]]`, `[["a"],["b"]]`, 1),
		"guard flattened":      strings.Replace(diffBase, `{"kind":"all","guards":[{"kind":"in","value":{"name":"right","source":"error"},"labels":["crash"]}]}`, `{"kind":"in","value":{"name":"right","source":"error"},"labels":["crash"]}`, 1),
		"otherwise null field": strings.Replace(diffBase, `"source":"error"}`, `"source":"error","field":null}`, 1),
	}
	for name, doc := range same {
		if got := id(doc); got != base {
			t.Errorf("%s changed the identity", name)
		}
	}
	if id(strings.Replace(diffBase, `"reason":"broken"`, `"reason":"other"`, 1)) == base {
		t.Error("a changed leaf kept the identity")
	}
}

func TestDiff(t *testing.T) {
	old := mustDecode(t, diffBase)
	d, err := graph.Diff(nil, old)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.MarshalJSON()
	if string(b) != `{"added":["done","failed","left","par","right","root","route"],"removed":[],"changed":[]}` {
		t.Fatalf("diff from empty: %s", b)
	}
	changed := strings.Replace(strings.Replace(diffBase, `"reason":"broken"`, `"reason":"other"`, 1),
		`{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}`, `{"kind":"succeed","name":"finished","output":{"kind":"null"},"bindings":[]}`, 1)
	d, err = graph.Diff(old, mustDecode(t, changed))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = d.MarshalJSON()
	if string(b) != `{"added":["finished"],"removed":["done"],"changed":["failed","root","route"]}` {
		t.Fatalf("diff: %s", b)
	}
	d, _ = graph.Diff(old, old)
	if b, _ = d.MarshalJSON(); string(b) != `{"added":[],"removed":[],"changed":[]}` {
		t.Fatalf("self diff: %s", b)
	}
	dup := strings.Replace(diffBase, `"name":"right"`, `"name":"left"`, 1)
	var de *graph.DuplicateNodeError
	if _, err := graph.Diff(old, mustDecode(t, dup)); !errors.As(err, &de) || de.Name != "left" {
		t.Fatalf("duplicate: %v", err)
	}
}
