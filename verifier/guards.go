package verifier

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/oecp/oecp/graph"
)

// selectorDomain returns the closed label set of the control s selects; ok
// is false when s names no control the node really has. The controls are: a
// declared signal field of a verifier (its labels), the error of a step or
// verifier (the four runtime errors), and the group control of a loop
// (terminated: converged or exhausted), a map (overflow: ok or overflow) and
// a par (raced: satisfied or no_satisfier for a first join; joined: reached
// or quorum_unreachable for the others).
func (a *analyzer) selectorDomain(s graph.ControlSelector) (domain []string, ok bool) {
	n, found := a.nodes[s.Name]
	if !found {
		return nil, false
	}
	switch s.Source {
	case graph.ControlSignal:
		v, isVerifier := n.(*graph.Verifier)
		if !isVerifier || s.Field == nil {
			return nil, false
		}
		domain, ok = v.Signals[*s.Field]
		return domain, ok
	case graph.ControlError:
		switch n.(type) {
		case *graph.Step, *graph.Verifier:
			return RuntimeErrors, s.Field == nil
		}
		return nil, false
	case graph.ControlGroup:
		if s.Field == nil {
			return nil, false
		}
		field, domain := groupControl(n)
		return domain, field != "" && *s.Field == field
	}
	return nil, false
}

// groupControl is the group control field of node n and its labels ("" for
// a node without one).
func groupControl(n graph.Node) (string, []string) {
	switch t := n.(type) {
	case *graph.Loop:
		return "terminated", []string{"converged", "exhausted"}
	case *graph.Map:
		return "overflow", []string{"ok", "overflow"}
	case *graph.Par:
		if t.Join.Kind == graph.JoinFirst {
			return "raced", []string{"satisfied", "no_satisfier"}
		}
		return "joined", []string{"reached", "quorum_unreachable"}
	}
	return "", nil
}

// checkGuard reports the faults of guard g (at path p) under code and
// returns whether it has none: each selector must name a control its node
// has (reported at p, related to that node); then each label of a k_of_n
// guard must lie in the domain of at least one of its selectors (reported
// once per guard at its labels, related to the nodes its selectors read).
func (a *analyzer) checkGuard(g *graph.Guard, p graph.Path, code graph.DiagnosticCode) bool {
	ok := true
	for _, s := range g.Selectors() {
		if _, legal := a.selectorDomain(s); !legal {
			ok = false
			a.emit(code, p, []string{s.Name}, "illegal control selector for node %s", s.Name)
		}
	}
	return ok && a.checkLabelDomains(g, p, code)
}

// checkLabelDomains reports every k_of_n guard within g (at path p) that
// lists a label none of its selectors can produce, and returns whether
// there is none.
func (a *analyzer) checkLabelDomains(g *graph.Guard, p graph.Path, code graph.DiagnosticCode) bool {
	ok := true
	switch g.Kind {
	case graph.GuardAll, graph.GuardAny:
		for i := range g.Guards {
			ok = a.checkLabelDomains(&g.Guards[i], p.With(graph.FieldSeg("guards"), graph.IndexSeg(i)), code) && ok
		}
	case graph.GuardNot:
		if g.Inner != nil {
			ok = a.checkLabelDomains(g.Inner, p.With(graph.FieldSeg("guard")), code)
		}
	case graph.GuardKOfN:
		producible := map[string]bool{}
		read := map[string]bool{}
		for _, s := range g.Values {
			domain, _ := a.selectorDomain(s)
			for _, l := range domain {
				producible[l] = true
			}
			read[s.Name] = true
		}
		var stray []string
		for _, l := range g.Labels {
			if !producible[l] {
				stray = append(stray, l)
			}
		}
		if len(stray) > 0 {
			ok = false
			a.emit(code, p.With(graph.FieldSeg("labels")), sortedKeys(read),
				"k_of_n labels %s are produced by none of its selectors", strings.Join(stray, ", "))
		}
	}
	return ok
}

// labels resolves a control selector in a world to its list of labels: at
// most one for a node in the reader's own map scope, one per item (flattened)
// when reading into a map from outside.
func (a *analyzer) labels(w *world, s graph.ControlSelector, readerMaps []string) []string {
	key := ctlKey(s)
	target := a.maps[s.Name]
	var outside []string
	for i, m := range target {
		if i >= len(readerMaps) || readerMaps[i] != m {
			outside = target[i:]
			break
		}
	}
	if len(outside) == 0 {
		if v := w.ctl[key]; v != "" {
			return []string{v}
		}
		return nil
	}
	return a.aggLabels(w.ctl, outside, key)
}

func (a *analyzer) aggLabels(ctl map[string]string, maps []string, key string) []string {
	enc := ctl[aggKey(maps[0])]
	if enc == "" {
		return nil
	}
	entries, ok := a.aggCache[enc]
	if !ok {
		a.m.charge(1 + len(enc)/16)
		_ = json.Unmarshal([]byte(enc), &entries)
		a.aggCache[enc] = entries
	}
	var out []string
	a.m.charge(1 + len(entries))
	for _, e := range entries {
		a.m.charge(e.Count)
		var ls []string
		if len(maps) == 1 {
			if v := e.Class[key]; v != "" {
				ls = []string{v}
			}
		} else {
			ls = a.aggLabels(e.Class, maps[1:], key)
		}
		for i := 0; i < e.Count; i++ {
			out = append(out, ls...)
		}
	}
	return out
}

func (a *analyzer) matches(ls, labels []string) int {
	a.m.charge(len(ls) * (1 + len(labels)/16))
	n := 0
	for _, l := range ls {
		if slices.Contains(labels, l) {
			n++
		}
	}
	return n
}

func (a *analyzer) eval(g *graph.Guard, w *world, readerMaps []string) bool {
	a.m.charge(1 + len(g.Labels))
	switch g.Kind {
	case graph.GuardIn:
		return g.Value != nil && a.matches(a.labels(w, *g.Value, readerMaps), g.Labels) > 0
	case graph.GuardAll:
		for i := range g.Guards {
			if !a.eval(&g.Guards[i], w, readerMaps) {
				return false
			}
		}
		return true
	case graph.GuardAny:
		for i := range g.Guards {
			if a.eval(&g.Guards[i], w, readerMaps) {
				return true
			}
		}
		return false
	case graph.GuardNot:
		return g.Inner != nil && !a.eval(g.Inner, w, readerMaps)
	case graph.GuardKOfN:
		n := uint64(0)
		for _, s := range g.Values {
			if a.matches(a.labels(w, s, readerMaps), g.Labels) > 0 {
				n++
			}
		}
		return n >= g.Count
	case graph.GuardKOfMap:
		return g.Value != nil && uint64(a.matches(a.labels(w, *g.Value, readerMaps), g.Labels)) >= g.Count
	}
	return false
}
