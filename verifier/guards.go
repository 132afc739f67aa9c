package verifier

import (
	"encoding/json"
	"slices"

	"github.com/oecp/oecp/graph"
)

// legalSelector reports whether s names a control the node really has: a
// declared signal field of a verifier, the error of a step or verifier, or
// the group control of a loop (terminated), map (overflow), or par (raced
// for a first join, joined for the others).
func (a *analyzer) legalSelector(s graph.ControlSelector) bool {
	n, ok := a.nodes[s.Name]
	if !ok {
		return false
	}
	switch s.Source {
	case graph.ControlSignal:
		v, ok := n.(*graph.Verifier)
		if !ok || s.Field == nil {
			return false
		}
		_, ok = v.Signals[*s.Field]
		return ok
	case graph.ControlError:
		switch n.(type) {
		case *graph.Step, *graph.Verifier:
			return s.Field == nil
		}
		return false
	case graph.ControlGroup:
		if s.Field == nil {
			return false
		}
		switch t := n.(type) {
		case *graph.Loop:
			return *s.Field == "terminated"
		case *graph.Map:
			return *s.Field == "overflow"
		case *graph.Par:
			if t.Join.Kind == graph.JoinFirst {
				return *s.Field == "raced"
			}
			return *s.Field == "joined"
		}
	}
	return false
}

// checkSelectors reports illegal selectors of guard g (at path p) and
// returns whether all are legal.
func (a *analyzer) checkSelectors(g *graph.Guard, p graph.Path, code graph.DiagnosticCode) bool {
	ok := true
	for _, s := range g.Selectors() {
		if !a.legalSelector(s) {
			ok = false
			a.emit(code, p, []string{s.Name}, "illegal control selector for node %s", s.Name)
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
