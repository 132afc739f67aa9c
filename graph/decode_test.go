package graph_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
)

// goldenSpec is the fixture graph of every golden transcript, byte for byte
// as `get` returns it.
const goldenSpec = `{"profile":"openengine.graph.single-worker/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},"root":{"kind":"step","name":"worker","worker":"legacy.zeroshot.ship@1","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":1000,"attempts":1}}`

func TestEncodeMatchesGoldenSpecBytes(t *testing.T) {
	// Sorted-key input as the golden request line carries it.
	in := `{"initialInput":{"kind":"null"},"policy":{"default":"deny","policy":"policy.default@1"},"profile":"openengine.graph.single-worker/v1","root":{"attempts":1,"input":{"kind":"null"},"inputBindings":[],"kind":"step","name":"worker","output":{"kind":"null"},"timeoutMs":1000,"worker":"legacy.zeroshot.ship@1","writeBindings":[]}}`
	g, err := graph.Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := g.MarshalJSON()
	if string(out) != goldenSpec {
		t.Fatalf("got  %s\nwant %s", out, goldenSpec)
	}
	r := graph.Structural(g)
	ir, _ := graph.CompiledIR(g, *r.Bounds)
	wantBounds := `"bounds":{"termination":{"kind":"acyclic","order":["worker"]},"maxNodeExecutions":1,"peakConcurrency":1,"attemptsPerNode":{"worker":1}}}`
	if !strings.HasSuffix(string(ir), wantBounds) {
		t.Fatalf("golden bounds: %s", ir)
	}
}

// mutate replaces the first occurrence of old in the golden spec.
func mutate(old, new string) string { return strings.Replace(goldenSpec, old, new, 1) }

const choiceGraph = `{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"p@1","default":"deny"},"root":{"kind":"choice","name":"c","state":{"kind":"null"},"branches":[{"when":{"kind":"in","value":{"name":"x","source":"error"},"labels":["timeout"]},"node":{"kind":"fail","name":"f","reason":"bad"}}]OTHERWISE,"promotedStatePaths":[]}}`

var choiceBase = strings.Replace(choiceGraph, "OTHERWISE", "", 1)

func TestDecodeStrictness(t *testing.T) {
	cases := []struct {
		name, doc string
		want      graph.Violation // "" = must decode
	}{
		{"golden", goldenSpec, ""},
		{"integral float bound", mutate(`"timeoutMs":1000`, `"timeoutMs":1000.0`), ""},
		{"exponent bound", mutate(`"timeoutMs":1000`, `"timeoutMs":1e3`), ""},
		{"max safe bound", mutate(`"timeoutMs":1000`, `"timeoutMs":9007199254740991`), ""},
		{"bound above 2^53-1", mutate(`"timeoutMs":1000`, `"timeoutMs":9007199254740992`), graph.ViolationInvalidBound},
		{"fractional bound", mutate(`"timeoutMs":1000`, `"timeoutMs":1.5`), graph.ViolationInvalidBound},
		{"negative bound", mutate(`"attempts":1`, `"attempts":-1`), graph.ViolationInvalidBound},
		{"zero bound", mutate(`"attempts":1`, `"attempts":0`), graph.ViolationInvalidBound},
		{"string bound", mutate(`"attempts":1`, `"attempts":"1"`), graph.ViolationInvalidType},
		{"unknown top-level key", mutate(`{"profile"`, `{"tenant":"x","profile"`), graph.ViolationUnknownField},
		{"unknown policy key", mutate(`"default":"deny"`, `"default":"deny","url":"https://x"`), graph.ViolationUnknownField},
		{"policy default allow", mutate(`"default":"deny"`, `"default":"allow"`), graph.ViolationInvalidValue},
		{"missing root", mutate(`,"root":`, `,"rooot":`), graph.ViolationUnknownField},
		{"step script", mutate(`"attempts":1`, `"attempts":1,"script":"rm -rf"`), graph.ViolationForbiddenWorkerField},
		{"missing bindings", mutate(`"inputBindings":[],`, ``), graph.ViolationMissingField},
		{"null bindings", mutate(`"inputBindings":[]`, `"inputBindings":null`), graph.ViolationInvalidType},
		{"instructions null is absent", mutate(`"attempts":1`, `"attempts":1,"instructions":null`), ""},
		{"instructions", mutate(`"attempts":1`, `"attempts":1,"instructions":"Review <the> & change\u2028"`), ""},
		{"blank instructions", mutate(`"attempts":1`, `"attempts":1,"instructions":" \n\t"`), graph.ViolationInvalidString},
		{"NUL instructions", mutate(`"attempts":1`, `"attempts":1,"instructions":"a\u0000b"`), graph.ViolationInvalidString},
		{"overlong instructions", mutate(`"attempts":1`, `"attempts":1,"instructions":"`+strings.Repeat("a", graph.MaxInstructionsBytes+1)+`"`), graph.ViolationInvalidString},
		{"worker leading-zero version", mutate(`ship@1`, `ship@01`), graph.ViolationInvalidStableRef},
		{"worker digit-first name", mutate(`legacy.zeroshot.ship@1`, `1ship@1`), graph.ViolationInvalidStableRef},
		{"worker URL", mutate(`legacy.zeroshot.ship@1`, `https://x/y@1`), graph.ViolationInvalidStableRef},
		{"worker 256 bytes", mutate(`legacy.zeroshot.ship@1`, strings.Repeat("a", 254)+`@1`), ""},
		{"worker 257 bytes", mutate(`legacy.zeroshot.ship@1`, strings.Repeat("a", 255)+`@1`), graph.ViolationInvalidStableRef},
		{"name 128 bytes", mutate(`"name":"worker"`, `"name":"`+strings.Repeat("n", 128)+`"`), ""},
		{"name 129 bytes", mutate(`"name":"worker"`, `"name":"`+strings.Repeat("n", 129)+`"`), graph.ViolationInvalidIdentifier},
		{"name with space", mutate(`"name":"worker"`, `"name":"wor ker"`), graph.ViolationInvalidIdentifier},
		{"name non-ascii", mutate(`"name":"worker"`, `"name":"wörker"`), graph.ViolationInvalidIdentifier},
		{"duplicate key last wins", mutate(`"attempts":1`, `"attempts":0,"attempts":1`), ""},
		{"payload pattern", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"string","pattern":".*"}`), graph.ViolationUnsafePayloadConstraint},
		{"payload oneOf", mutate(`"input":{"kind":"null"}`, `"input":{"oneOf":[]}`), graph.ViolationUnsafePayloadKind},
		{"payload $ref", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"record","fields":{},"$ref":"#"}`), graph.ViolationUnsafePayloadConstraint},
		{"record field extra", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"record","fields":{"a":{"type":{"kind":"null"},"required":true,"default":1}}}`), graph.ViolationUnsafePayloadConstraint},
		{"record field required missing", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"record","fields":{"a":{"type":{"kind":"null"}}}}`), graph.ViolationMissingField},
		{"array missing items", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"array"}`), graph.ViolationMissingField},
		{"enum unsorted ok", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"enum","values":["b","a"]}`), ""},
		{"enum bad label", mutate(`"input":{"kind":"null"}`, `"input":{"kind":"enum","values":["a b"]}`), graph.ViolationInvalidIdentifier},
		{"unknown profile", mutate(`single-worker/v1`, `multi/v1`), graph.ViolationUnknownProfile},
		{"node kind exec", mutate(`"kind":"step"`, `"kind":"exec"`), graph.ViolationUnknownNode},
		{"node not object", mutate(`"root":{`, `"root":"step","x":{`), graph.ViolationUnknownField},
		{"trailing data", goldenSpec + `{}`, graph.ViolationMalformedJSON},
		{"not json", `{`, graph.ViolationMalformedJSON},
		{"null graph", `null`, graph.ViolationInvalidType},
		{"array graph", `[]`, graph.ViolationInvalidType},
		{"invalid utf8", mutate(`"name":"worker"`, "\"name\":\"w\xff\""), graph.ViolationMalformedJSON},
		{"otherwise absent", strings.Replace(choiceGraph, "OTHERWISE", "", 1), ""},
		{"otherwise null", strings.Replace(choiceGraph, "OTHERWISE", `,"otherwise":null`, 1), ""},
		{"otherwise node", strings.Replace(choiceGraph, "OTHERWISE", `,"otherwise":{"kind":"succeed","name":"s","output":{"kind":"null"},"bindings":[]}`, 1), ""},
		{"fail reason unhandled", strings.Replace(choiceBase, `"reason":"bad"`, `"reason":"unhandled"`, 1), graph.ViolationInvalidValue},
		{"guard script", strings.Replace(choiceBase, `"labels":["timeout"]}`, `"labels":["timeout"],"script":"1"}`, 1), graph.ViolationExecutableGuard},
		{"guard jsonpath kind", strings.Replace(choiceBase, `"kind":"in"`, `"kind":"jsonpath"`, 1), graph.ViolationExecutableGuard},
		{"guard duplicate labels", strings.Replace(choiceBase, `["timeout"]`, `["timeout","timeout"]`, 1), graph.ViolationDuplicateEnum},
		{"guard empty labels", strings.Replace(choiceBase, `["timeout"]`, `[]`, 1), graph.ViolationEmptyEnum},
		{"selector string", strings.Replace(choiceBase, `{"name":"x","source":"error"}`, `"$.x"`, 1), graph.ViolationStringSelector},
		{"selector field null", strings.Replace(choiceBase, `"source":"error"}`, `"source":"error","field":null}`, 1), ""},
		{"selector bad source", strings.Replace(choiceBase, `"source":"error"`, `"source":"env"`, 1), graph.ViolationInvalidValue},
		{"empty branches", strings.Replace(choiceBase, `"branches":[{"when":{"kind":"in","value":{"name":"x","source":"error"},"labels":["timeout"]},"node":{"kind":"fail","name":"f","reason":"bad"}}]`, `"branches":[]`, 1), graph.ViolationInvalidCollection},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := graph.Decode([]byte(tc.doc))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if _, err := g.MarshalJSON(); err != nil {
					t.Fatal(err)
				}
				return
			}
			var de *graph.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want %s, got %v", tc.want, err)
			}
			if de.Violation != tc.want {
				t.Fatalf("violation %s, want %s: %v", de.Violation, tc.want, err)
			}
			if de.Path == "" || de.Message == "" || !strings.HasPrefix(de.Error(), "$") {
				t.Fatalf("error lacks path or message: %q", de.Error())
			}
		})
	}
}

func TestEncodeNullVsAbsent(t *testing.T) {
	g, err := graph.Decode([]byte(strings.Replace(strings.Replace(choiceGraph, "OTHERWISE", "", 1), `"source":"error"}`, `"source":"error","field":null}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := g.MarshalJSON()
	for _, want := range []string{`"otherwise":null`, `{"name":"x","source":"error","field":null}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("encoding lacks %s: %s", want, out)
		}
	}
	g2, _ := graph.Decode([]byte(mutate(`"attempts":1`, `"attempts":1,"instructions":null`)))
	out2, _ := g2.MarshalJSON()
	if string(out2) != goldenSpec {
		t.Errorf("absent instructions must be omitted: %s", out2)
	}
	g3, _ := graph.Decode([]byte(mutate(`"attempts":1`, `"attempts":1,"instructions":"a<b>&\"\n\u0001\u2028é"`)))
	out3, _ := g3.MarshalJSON()
	if want := `"worker":"legacy.zeroshot.ship@1","instructions":"a<b>&\"\n\u0001` + "\u2028é" + `","input"`; !strings.Contains(string(out3), want) {
		t.Errorf("instructions order/escaping: %s", out3)
	}
}

func TestUnmarshalJSONInLargerParams(t *testing.T) {
	var params struct {
		Graph graph.GraphSpec `json:"graph"`
	}
	if err := jsonUnmarshal(`{"graph":`+goldenSpec+`}`, &params); err != nil {
		t.Fatal(err)
	}
	if params.Graph.Root.NodeName() != "worker" {
		t.Fatalf("root %q", params.Graph.Root.NodeName())
	}
	err := jsonUnmarshal(`{"graph":`+mutate(`"attempts":1`, `"attempts":1,"command":"x"`)+`}`, &params)
	if !errors.Is(err, graph.ErrSchemaViolation) {
		t.Fatalf("want schema violation, got %v", err)
	}
}

func TestMarshalAsValueField(t *testing.T) {
	params := struct {
		Graph graph.GraphSpec `json:"graph"`
	}{*mustDecode(t, goldenSpec)}
	b, err := json.Marshal(params)
	if err != nil || string(b) != `{"graph":`+goldenSpec+`}` {
		t.Fatalf("%s %v", b, err)
	}
}
