package graph

import (
	"encoding/json"
	"testing"
)

// TestCanonicalTreeWritesAsItsJSONWould: a tree of parsed JSON values is
// written as CanonicalJSON writes what encoding/json makes of it.
func TestCanonicalTreeWritesAsItsJSONWould(t *testing.T) {
	for _, v := range []any{
		nil, true, "a<b>&\u2028", json.Number("1.50"), json.Number("1e2"), json.Number("-0"),
		[]any{json.Number("3"), "x", nil, []any{}},
		map[string]any{"b": map[string]any{"z": false, "a": []any{"q"}}, "a": json.Number("10"), "é": "\x7f"},
		"bad \xff utf-8", map[string]any{"bad \xfe": "k"},
	} {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := CanonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		got, err := CanonicalJSON(v)
		if err != nil || string(got) != string(want) {
			t.Fatalf("%#v: %s %v, want %s", v, got, err, want)
		}
	}
	for _, n := range []string{"01", "true", " 1", "1 ", "[1]", "--1"} {
		if _, err := CanonicalJSON(json.Number(n)); err == nil {
			t.Fatalf("the malformed number %q is written", n)
		}
	}
}
