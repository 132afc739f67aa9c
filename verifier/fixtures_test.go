package verifier_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
)

var fixtureRoot = filepath.Join("..", "testdata", "oecp-v1", "fixtures")

func loadRegistry(t testing.TB) *verifier.StaticRegistry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureRoot, "verifier", "registry.json"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := verifier.LoadStaticRegistry(data)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func jsonValue(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return v
}

// ownVectors holds this package's own verifier vectors, in the pack's
// format and over the pack's registry, beside the pack's.
var ownVectors = filepath.Join("testdata", "vectors")

func vectorFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors under %s: %v", dir, err)
	}
	return files
}

func TestVerifierVectors(t *testing.T) {
	v := verifier.New(loadRegistry(t))
	files := append(vectorFiles(t, filepath.Join(fixtureRoot, "verifier")), vectorFiles(t, ownVectors)...)
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f)) + "/" + strings.TrimSuffix(filepath.Base(f), ".json")
		if strings.HasPrefix(f, ownVectors) {
			name = "own/" + name
		}
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var vec struct {
				Graph    json.RawMessage `json:"graph"`
				Expected json.RawMessage `json:"expected"`
			}
			if err := json.Unmarshal(data, &vec); err != nil {
				t.Fatal(err)
			}
			g, err := graph.Decode(vec.Graph)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, err := json.Marshal(v.Verify(g))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(jsonValue(t, got), jsonValue(t, vec.Expected)) {
				t.Errorf("got  %s\nwant %s", got, vec.Expected)
			}
		})
	}
}

// descriptorCodes maps the fixture-internal expectedCode labels to what this
// package reports.
var descriptorCodes = map[string]verifier.DescriptorErrorCode{
	"FORBIDDEN_FIELD":                   verifier.CodeForbiddenField,
	"INVALID_BUILTIN_BINDING":           verifier.CodeInvalidBuiltinBinding,
	"UNSUPPORTED_WORKER_BINDING":        verifier.CodeUnsupportedBinding,
	"DUPLICATE_CREDENTIAL_REQUIREMENTS": verifier.CodeDuplicateCredentials,
	"DUPLICATE_GRAPH_PROFILES":          verifier.CodeDuplicateGraphProfiles,
	"EMPTY_ARTIFACT_TYPES":              verifier.CodeEmptyArtifactTypes,
	"EMPTY_GRAPH_PROFILES":              verifier.CodeEmptyGraphProfiles,
	"INVALID_LEGACY_BINDING":            verifier.CodeInvalidLegacyBinding,
	"INCOMPLETE_WORKER_ERRORS":          verifier.CodeIncompleteWorkerErrors,
	"UNKNOWN_WORKER_ERROR":              verifier.CodeUnknownWorkerError,
}

var outcomeErrors = map[string]error{
	"INVALID_FAILURE_PAIR": verifier.ErrInvalidFailurePair,
}

var compatibilityMessages = map[string]string{
	"INPUT":             "graph input is not a subtype of descriptor input",
	"OUTPUT":            "descriptor output is not a subtype of graph output",
	"SIGNAL_FIELD":      "descriptor signal missing is absent from graph declaration",
	"VERIFIER_CONTRACT": "step node resolved to a verifier-only descriptor",
	"DIAGNOSTIC":        "descriptor diagnostic is not a subtype of graph diagnostic",
}

func fixtureKind(doc map[string]json.RawMessage) string {
	if k, ok := doc["fixtureKind"]; ok {
		var s string
		_ = json.Unmarshal(k, &s)
		return s
	}
	// A vector without fixtureKind is told apart by the first of these keys
	// it has.
	for _, k := range [][2]string{{"normalized", "mock"}, {"status", "outcome"}, {"artifactId", "artifact"}} {
		if doc[k[0]] != nil {
			return k[1]
		}
	}
	return "descriptor"
}

func TestWorkerVectors(t *testing.T) {
	for _, f := range vectorFiles(t, filepath.Join(fixtureRoot, "workers")) {
		negative := filepath.Base(filepath.Dir(f)) == "negative"
		name := filepath.Base(filepath.Dir(f)) + "/" + strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			var expected string
			_ = json.Unmarshal(doc["expectedCode"], &expected)
			body := json.RawMessage(data)
			if d, ok := doc["document"]; ok {
				body = d
			}
			switch fixtureKind(doc) {
			case "descriptor":
				d, err := verifier.ParseDescriptor(body)
				if err == nil {
					err = d.Validate()
				}
				if !negative {
					if err != nil {
						t.Fatalf("valid descriptor rejected: %v", err)
					}
					return
				}
				var de *verifier.DescriptorError
				if !errors.As(err, &de) {
					t.Fatalf("want %s, got %v", expected, err)
				}
				want, ok := descriptorCodes[expected]
				if !ok {
					t.Fatalf("unmapped expectedCode %s", expected)
				}
				if de.Code != want {
					t.Fatalf("want %s (%s), got %s: %s", expected, want, de.Code, de.Reason)
				}
			case "outcome":
				_, err := verifier.ParseOutcome(body)
				if !negative {
					if err != nil {
						t.Fatalf("valid outcome rejected: %v", err)
					}
					return
				}
				if want := outcomeErrors[expected]; want == nil || !errors.Is(err, want) {
					t.Fatalf("want %s, got %v", expected, err)
				}
			case "artifact":
				if _, err := graph.DecodeArtifactRef(body); err != nil {
					t.Fatalf("artifact receipt rejected: %v", err)
				}
			case "mock":
				var m struct {
					Normalized json.RawMessage `json:"normalized"`
					Profile    string          `json:"profile"`
					Version    string          `json:"version"`
				}
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatal(err)
				}
				o, err := verifier.ParseOutcome(m.Normalized)
				if err != nil {
					t.Fatalf("normalized outcome rejected: %v", err)
				}
				var want verifier.Outcome
				switch o.Reason {
				case verifier.ReasonAuthenticationRequired:
					want = verifier.NormalizeInteraction(verifier.InteractionAuthRequired)
				case verifier.ReasonInteractiveInputRequired:
					want = verifier.NormalizeInteraction(verifier.InteractionInputRequested)
				default:
					t.Fatalf("unexpected normalisation %+v", o)
				}
				if !reflect.DeepEqual(o, want) {
					t.Fatalf("got %+v, want %+v", o, want)
				}
			case "compatibility":
				var c struct {
					Graph    json.RawMessage `json:"graph"`
					Registry []struct {
						Descriptor      json.RawMessage `json:"descriptor"`
						RequestedWorker string          `json:"requestedWorker"`
					} `json:"registry"`
				}
				if err := json.Unmarshal(data, &c); err != nil {
					t.Fatal(err)
				}
				g, err := graph.Decode(c.Graph)
				if err != nil {
					t.Fatal(err)
				}
				descs := map[string]*verifier.Descriptor{}
				for _, e := range c.Registry {
					d, err := verifier.ParseDescriptor(e.Descriptor)
					if err != nil {
						t.Fatal(err)
					}
					descs[e.RequestedWorker] = d
				}
				ds := verifier.CheckCompatibility(g, verifier.NewStaticRegistry(descs, nil))
				want, ok := compatibilityMessages[expected]
				if !ok {
					t.Fatalf("unmapped expectedCode %s", expected)
				}
				found := false
				for _, d := range ds {
					found = found || d.Message == want
				}
				if !found {
					t.Fatalf("want %q among %v", want, ds)
				}
			default:
				t.Fatalf("unknown fixture kind in %s", f)
			}
		})
	}
}
