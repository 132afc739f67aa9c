package graph_test

import (
	"bytes"
	"encoding/json"

	"sort"
	"testing"

	"github.com/oecp/oecp/graph"
)

// graphSeeds returns every graph document of the pack's fixtures.
func graphSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, f := range fixtureFiles(t, "graph/positive") {
		seeds = append(seeds, readFile(t, f))
	}
	for _, f := range fixtureFiles(t, "graph/negative") {
		var v struct{ Document json.RawMessage }
		if json.Unmarshal(readFile(t, f), &v) == nil {
			seeds = append(seeds, v.Document)
		}
	}
	for _, dir := range []string{"verifier/positive", "verifier/negative"} {
		for _, f := range fixtureFiles(t, dir) {
			var v struct{ Graph json.RawMessage }
			if json.Unmarshal(readFile(t, f), &v) == nil {
				seeds = append(seeds, v.Graph)
			}
		}
	}
	seeds = append(seeds, []byte(goldenSpec), []byte(diffBase))
	return seeds
}

// FuzzDecode: decoding never panics, and decode → encode → decode is stable.
func FuzzDecode(f *testing.F) {
	for _, s := range graphSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := graph.Decode(data)
		if err != nil {
			return
		}
		enc, err := g.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		g2, err := graph.Decode(enc)
		if err != nil {
			t.Fatalf("own encoding rejected: %v\n%s", err, enc)
		}
		enc2, _ := g2.MarshalJSON()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("unstable encoding:\n%s\n%s", enc, enc2)
		}
		r := graph.Structural(g)
		if r.OK != (r.Bounds != nil) {
			t.Fatal("OK and Bounds disagree")
		}
		if r.OK {
			if _, err := graph.CompiledIR(g, *r.Bounds); err != nil {
				t.Fatal(err)
			}
			if d, err := graph.Diff(g, g2); err != nil || len(d.Added)+len(d.Removed)+len(d.Changed) != 0 {
				t.Fatalf("self diff %+v %v", d, err)
			}
		}
	})
}

// shuffled re-emits a JSON value with object keys in reverse order and
// label sets ("values", "labels" and signal label arrays) reversed.
func shuffled(v any, setKey bool) []byte { return shuffledIn(v, setKey, false) }

func shuffledIn(v any, setKey, signals bool) []byte {
	var b bytes.Buffer
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.Write(shuffledIn(t[k], k == "values" || k == "labels" || signals, k == "signals"))
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i := range t {
			j := i
			if setKey {
				j = len(t) - 1 - i
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(shuffledIn(t[j], false, false))
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(string(t))
	default:
		out, _ := json.Marshal(t)
		b.Write(out)
	}
	return b.Bytes()
}

// FuzzIdentityOrderIndependent: identity does not depend on key order or on
// the order of set members.
func FuzzIdentityOrderIndependent(f *testing.F) {
	for _, s := range graphSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := graph.Decode(data)
		if err != nil || !graph.Structural(g).OK {
			return
		}
		id, err := graph.Identity(g)
		if err != nil {
			t.Fatal(err)
		}
		enc, _ := g.MarshalJSON()
		dec := json.NewDecoder(bytes.NewReader(enc))
		dec.UseNumber()
		var tree any
		if err := dec.Decode(&tree); err != nil {
			t.Fatal(err)
		}
		g2, err := graph.Decode(shuffled(tree, false))
		if err != nil {
			t.Fatalf("shuffled graph rejected: %v", err)
		}
		id2, err := graph.Identity(g2)
		if err != nil || id2 != id {
			t.Fatalf("identity changed with key/set order: %s vs %s (%v)", id, id2, err)
		}
	})
}

// FuzzValidate: payload validation never panics and accepts values the
// type was checked against consistently.
func FuzzValidate(f *testing.F) {
	f.Add([]byte(recordType), []byte(`{"a":1,"b":true}`))
	f.Add([]byte(`{"kind":"array","items":{"kind":"enum","values":["a"]}}`), []byte(`["a","b"]`))
	f.Add([]byte(`{"kind":"integer"}`), []byte(`1.0`))
	f.Fuzz(func(t *testing.T, typ, value []byte) {
		p, err := graph.DecodePayloadType(typ)
		if err != nil {
			return
		}
		err1 := p.Validate(value)
		err2 := p.Validate(value)
		if (err1 == nil) != (err2 == nil) {
			t.Fatal("validation is not deterministic")
		}
		if !graph.IsSubtype(p, p) {
			t.Fatalf("subtyping is not reflexive for %s", typ)
		}
	})
}

// FuzzCanonicalJSON: canonicalisation never panics and is idempotent.
func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"b":[1,1.5,{"z":null}],"a":"\u2028<"}`))
	f.Add([]byte(goldenSpec))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := graph.CanonicalJSON(json.RawMessage(data))
		if err != nil {
			return
		}
		c2, err := graph.CanonicalJSON(json.RawMessage(c))
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %s -> %s (%v)", c, c2, err)
		}
	})
}
