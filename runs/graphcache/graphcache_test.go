package graphcache_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/runs/graphcache"
	"github.com/oecp/oecp/verifier"
)

// graphWith is a full-profile graph of one step whose instructions are
// instr.
func graphWith(instr string) json.RawMessage {
	return json.RawMessage(`{"profile":"openengine.graph.full/v1","initialInput":{"kind":"null"},"policy":{"policy":"policy.default@1","default":"deny"},` +
		`"root":{"kind":"seq","name":"main","state":{"kind":"null"},"promotedStatePaths":[],"children":[` +
		`{"kind":"step","name":"a","worker":"agent.a@1","instructions":"` + instr +
		`","input":{"kind":"null"},"output":{"kind":"null"},"inputBindings":[],"writeBindings":[],"timeoutMs":600000,"attempts":1},` +
		`{"kind":"succeed","name":"done","output":{"kind":"null"},"bindings":[]}]}}`)
}

func decode(t *testing.T, c *graphcache.Cache, raw json.RawMessage) *graph.GraphSpec {
	t.Helper()
	g, err := c.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestDecodeSharesTheGraphOfTheSameBytes: the same bytes decode to the
// one graph; other bytes, and a graph past MaxGraph, to a graph of their
// own; bytes that are no graph fail every time.
func TestDecodeSharesTheGraphOfTheSameBytes(t *testing.T) {
	var c graphcache.Cache
	a := decode(t, &c, graphWith("one"))
	if decode(t, &c, graphWith("one")) != a {
		t.Fatal("the same bytes decoded twice")
	}
	if decode(t, &c, graphWith("two")) == a {
		t.Fatal("other bytes share a graph")
	}
	big := append(json.RawMessage(strings.Repeat(" ", graphcache.MaxGraph)), graphWith("one")...)
	if decode(t, &c, big) == decode(t, &c, big) {
		t.Fatal("a graph past MaxGraph was kept")
	}
	for range 2 {
		if _, err := c.Decode(json.RawMessage(`{"profile":`)); err == nil {
			t.Fatal("bytes that are no graph decoded")
		}
	}
}

// TestVerifyKeepsOnlyAcceptance: a graph the cache decoded and the
// verifier accepted is not verified again; a rejection, a verifier error
// and a graph the cache did not decode are verified every time, and each
// answer is the verifier's.
func TestVerifyKeepsOnlyAcceptance(t *testing.T) {
	var c graphcache.Cache
	calls := map[string]int{}
	answer := map[string]error{}
	verify := func(_ context.Context, g *graph.GraphSpec, _ verifier.Registry) (verifier.Result, error) {
		instr := *g.Root.(*graph.Seq).Children[0].(*graph.Step).Instructions
		calls[instr]++
		switch {
		case answer[instr] != nil:
			return verifier.Result{}, answer[instr]
		case instr == "bad":
			return verifier.Result{Status: verifier.StatusRejected, Diagnostics: []graph.Diagnostic{}}, nil
		}
		return verifier.Result{Status: verifier.StatusVerified, Diagnostics: []graph.Diagnostic{}}, nil
	}
	errDown := errors.New("verifier unavailable")
	answer["flaky"] = errDown
	check := func(instr string, want error, ok bool) {
		t.Helper()
		raw := graphWith(instr)
		res, err := c.Verify(raw, verify)(context.Background(), decode(t, &c, raw), nil)
		if !errors.Is(err, want) || (err == nil && res.OK() != ok) {
			t.Fatalf("graph %q: %v %v", instr, res, err)
		}
	}
	for range 3 {
		check("good", nil, true)
		check("bad", nil, false)
	}
	check("flaky", errDown, false)
	answer["flaky"] = nil
	check("flaky", nil, true)
	check("flaky", nil, true)
	// A graph decoded elsewhere is verified, whatever the cache holds.
	other, err := graph.Decode(graphWith("good"))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Verify(graphWith("good"), verify)(context.Background(), other, nil); err != nil || !res.OK() {
		t.Fatalf("graph decoded elsewhere: %v %v", res, err)
	}
	want := map[string]int{"good": 2, "bad": 3, "flaky": 2}
	for instr, n := range want {
		if calls[instr] != n {
			t.Errorf("graph %q verified %d times, want %d", instr, calls[instr], n)
		}
	}
}
