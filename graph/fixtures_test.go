package graph_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
)

// fixtureRoot is the conformance pack kept in the repository.
var fixtureRoot = filepath.Join("..", "testdata", "oecp-v1", "fixtures")

// fixtureFiles lists the *.json files of a fixture directory so new vectors
// are picked up without code changes.
func fixtureFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtureRoot, dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no fixtures in %s (expected the pack at %s)", dir, fixtureRoot)
	}
	sort.Strings(files)
	return files
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonEqual compares two documents as JSON values.
func jsonEqual(t testing.TB, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want invalid JSON: %v", err)
	}
	return reflect.DeepEqual(g, w)
}

// reencode decodes a document with dec and encodes the result again.
func reencode[T json.Marshaler](dec func([]byte) (T, error)) func([]byte) ([]byte, error) {
	return func(doc []byte) ([]byte, error) {
		v, err := dec(doc)
		if err != nil {
			return nil, err
		}
		return v.MarshalJSON()
	}
}

// schemaCodecs re-encodes a document with the decoder of a fixture schema.
var schemaCodecs = map[string]func([]byte) ([]byte, error){
	"graph":       reencode(graph.Decode),
	"compiled-ir": reencode(graph.DecodeIR),
	"artifact":    reencode(graph.DecodeArtifactRef),
	"diagnostic":  reencode(graph.DecodeDiagnostic),
}

// decodeAs decodes a document with the decoder of a fixture schema and
// re-encodes it.
func decodeAs(schema string, doc []byte) ([]byte, error) {
	codec, ok := schemaCodecs[schema]
	if !ok {
		return nil, errors.New("unknown fixture schema " + schema)
	}
	return codec(doc)
}

// positiveSchema infers the schema of an unwrapped positive vector from its
// discriminating keys.
func positiveSchema(t testing.TB, doc []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ key, schema string }{{"artifactId", "artifact"}, {"severity", "diagnostic"}, {"bounds", "compiled-ir"}} {
		if m[s.key] != nil {
			return s.schema
		}
	}
	return "graph"
}

func TestGraphPositiveFixtures(t *testing.T) {
	for _, file := range fixtureFiles(t, "graph/positive") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			doc := readFile(t, file)
			schema := positiveSchema(t, doc)
			enc, err := decodeAs(schema, doc)
			if err != nil {
				t.Fatalf("decode as %s: %v", schema, err)
			}
			if !jsonEqual(t, enc, doc) {
				t.Fatalf("re-encoding changed the value:\n%s", enc)
			}
			again, err := decodeAs(schema, enc)
			if err != nil {
				t.Fatalf("decode of own encoding: %v", err)
			}
			if !bytes.Equal(again, enc) {
				t.Fatalf("encoding is not stable:\n%s\n%s", enc, again)
			}
		})
	}
}

func TestGraphNegativeFixtures(t *testing.T) {
	for _, file := range fixtureFiles(t, "graph/negative") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var vec struct {
				Schema       string          `json:"schema"`
				Document     json.RawMessage `json:"document"`
				ExpectedCode string          `json:"expectedCode"`
			}
			if err := json.Unmarshal(readFile(t, file), &vec); err != nil {
				t.Fatal(err)
			}
			_, err := decodeAs(vec.Schema, vec.Document)
			if err == nil {
				t.Fatalf("%s document decoded; want %s", vec.Schema, vec.ExpectedCode)
			}
			var de *graph.DecodeError
			if !errors.As(err, &de) || !errors.Is(err, graph.ErrSchemaViolation) {
				t.Fatalf("error %v (%T) is not a *graph.DecodeError", err, err)
			}
			if string(de.Violation) != vec.ExpectedCode {
				t.Fatalf("violation %s, want %s (%v)", de.Violation, vec.ExpectedCode, err)
			}
		})
	}
}

func TestCanonicalFixtures(t *testing.T) {
	identities := map[string]string{}
	for _, file := range fixtureFiles(t, "graph/canonical") {
		if strings.HasSuffix(file, ".canonical.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			ir, err := graph.DecodeIR(readFile(t, file))
			if err != nil {
				t.Fatal(err)
			}
			canonical, err := graph.CanonicalIR(ir)
			if err != nil {
				t.Fatal(err)
			}
			stem := strings.TrimSuffix(file, ".json")
			if want, err := os.ReadFile(stem + ".canonical.json"); err == nil {
				if !bytes.Equal(canonical, want) {
					t.Fatalf("canonical bytes differ:\n got %s\nwant %s", canonical, want)
				}
			}
			id, err := graph.IdentityIR(ir)
			if err != nil {
				t.Fatal(err)
			}
			if want, err := os.ReadFile(stem + ".sha256"); err == nil {
				if id != strings.TrimSpace(string(want)) {
					t.Fatalf("identity %s, want %s", id, want)
				}
			}
			identities[name] = id
		})
	}
	// The identity relations the vectors are built to show.
	if identities["reordered"] != identities["base"] {
		t.Errorf("reordered (par branches swapped) identity %s != base %s", identities["reordered"], identities["base"])
	}
	if identities["sequence-mutated"] == identities["base"] {
		t.Errorf("sequence-mutated (seq children swapped) has the base identity")
	}
}

// eachVerifierVector runs check in a subtest for each verifier vector
// file under dir, with the vector's graph, decoded and verified
// structurally, and its expectations (E: the part of "expected" the test
// reads).
func eachVerifierVector[E any](t *testing.T, dir string, check func(t *testing.T, g *graph.GraphSpec, res graph.Result, expected E)) {
	for _, file := range fixtureFiles(t, dir) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var vec struct {
				Graph    json.RawMessage `json:"graph"`
				Expected E               `json:"expected"`
			}
			if err := json.Unmarshal(readFile(t, file), &vec); err != nil {
				t.Fatal(err)
			}
			g, err := graph.Decode(vec.Graph)
			if err != nil {
				t.Fatal(err)
			}
			check(t, g, graph.Structural(g), vec.Expected)
		})
	}
}

// positiveExpected is what a positive verifier vector expects.
type positiveExpected struct {
	Status      string            `json:"status"`
	Diagnostics []json.RawMessage `json:"diagnostics"`
	CompiledIR  json.RawMessage   `json:"compiledIr"`
}

func TestVerifierPositiveFixturesBounds(t *testing.T) {
	eachVerifierVector(t, "verifier/positive", func(t *testing.T, g *graph.GraphSpec, res graph.Result, expected positiveExpected) {
		if !res.OK || res.Bounds == nil || len(res.Diagnostics) != 0 {
			t.Fatalf("structural verification failed: %+v", res.Diagnostics)
		}
		ir, err := graph.CompiledIR(g, *res.Bounds)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, ir, expected.CompiledIR) {
			t.Fatalf("compiled IR differs:\n got %s\nwant %s", ir, expected.CompiledIR)
		}
		if _, err := graph.Identity(g); err != nil {
			t.Fatal(err)
		}
	})
}

// negativeExpected is what a negative verifier vector expects.
type negativeExpected struct {
	Diagnostics []json.RawMessage `json:"diagnostics"`
}

// Structural diagnostics are a subset of what the reference verifier
// reports: whatever Structural emits for a negative vector must appear
// verbatim in its expected diagnostics.
func TestVerifierNegativeFixturesStructuralSubset(t *testing.T) {
	eachVerifierVector(t, "verifier/negative", func(t *testing.T, _ *graph.GraphSpec, res graph.Result, expected negativeExpected) {
		for _, d := range res.Diagnostics {
			got, _ := d.MarshalJSON()
			found := false
			for _, want := range expected.Diagnostics {
				if jsonEqual(t, got, want) {
					found = true
				}
			}
			if !found {
				t.Errorf("structural diagnostic not reported by the reference: %s", got)
			}
		}
	})
}
