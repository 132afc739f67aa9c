package graph

import "sort"

// MarshalJSON writes the graph in the reference field order (§5.1–§5.4)
// with enum sets, signal maps and record fields sorted and the reference's
// string escaping (§1.4). This is the form `get` returns as `spec`.
func (g GraphSpec) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	w.graph(&g, nil)
	return w.b, nil
}

// MarshalJSON writes the payload type in reference order.
func (p PayloadType) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	p.writeJSON(w)
	return w.b, nil
}

// MarshalJSON writes the guard in reference order.
func (g Guard) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	g.writeJSON(w)
	return w.b, nil
}

// MarshalNode writes one node (and its subtree) in reference order.
func MarshalNode(n Node) ([]byte, error) {
	w := &jsonWriter{}
	writeNode(w, n)
	return w.b, nil
}

func (w *jsonWriter) graph(g *GraphSpec, b *Bounds) {
	if g == nil {
		w.raw("null")
		return
	}
	w.raw(`{"profile":`)
	w.str(g.Profile)
	w.raw(`,"initialInput":`)
	g.InitialInput.writeJSON(w)
	w.raw(`,"policy":{"policy":`)
	w.str(g.Policy.Policy)
	w.raw(`,"default":`)
	w.str(g.Policy.Default)
	w.raw(`},"root":`)
	writeNode(w, g.Root)
	if b != nil {
		w.raw(`,"bounds":`)
		b.writeJSON(w)
	}
	w.raw("}")
}

func writeNode(w *jsonWriter, n Node) {
	if n == nil {
		w.raw("null")
		return
	}
	n.writeJSON(w)
}

func (p *PayloadType) writeJSON(w *jsonWriter) {
	w.raw(`{"kind":`)
	w.str(string(p.Kind))
	switch p.Kind {
	case PayloadRecord:
		w.raw(`,"fields":{`)
		names := make([]string, 0, len(p.Fields))
		for k := range p.Fields {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			f := p.Fields[k]
			w.key(k, i == 0)
			w.raw(`{"type":`)
			f.Type.writeJSON(w)
			if f.Required {
				w.raw(`,"required":true}`)
			} else {
				w.raw(`,"required":false}`)
			}
		}
		w.raw("}")
	case PayloadArray:
		w.raw(`,"items":`)
		if p.Items == nil {
			w.raw("null")
		} else {
			p.Items.writeJSON(w)
		}
	case PayloadEnum:
		w.raw(`,"values":`)
		w.strings(sortedCopy(p.Values))
	}
	w.raw("}")
}

func sortedCopy(ss []string) []string {
	if sort.StringsAreSorted(ss) {
		return ss
	}
	c := append([]string(nil), ss...)
	sort.Strings(c)
	return c
}

func (w *jsonWriter) path(p FieldPath) { w.strings(p) }

func (w *jsonWriter) paths(ps []FieldPath) {
	w.raw("[")
	for i, p := range ps {
		if i > 0 {
			w.raw(",")
		}
		w.path(p)
	}
	w.raw("]")
}

func (s *DataSelector) writeJSON(w *jsonWriter) {
	w.raw(`{"source":`)
	w.str(string(s.Source))
	w.raw(`,"path":`)
	w.path(s.Path)
	w.raw("}")
}

func (b *InputBinding) writeJSON(w *jsonWriter) {
	w.raw(`{"target":`)
	w.path(b.Target)
	w.raw(`,"value":`)
	b.Value.writeJSON(w)
	w.raw("}")
}

func (b *WriteBinding) writeJSON(w *jsonWriter) {
	w.raw(`{"value":{"node":`)
	w.str(b.Value.Node)
	w.raw(`,"channel":`)
	w.str(string(b.Value.Channel))
	w.raw(`,"path":`)
	w.path(b.Value.Path)
	w.raw(`},"target":`)
	w.path(b.Target)
	w.raw("}")
}

func (w *jsonWriter) inputBindings(bs []InputBinding) {
	w.raw("[")
	for i := range bs {
		if i > 0 {
			w.raw(",")
		}
		bs[i].writeJSON(w)
	}
	w.raw("]")
}

func (w *jsonWriter) writeBindings(bs []WriteBinding) {
	w.raw("[")
	for i := range bs {
		if i > 0 {
			w.raw(",")
		}
		bs[i].writeJSON(w)
	}
	w.raw("]")
}

func (s *ControlSelector) writeJSON(w *jsonWriter) {
	w.raw(`{"name":`)
	w.str(s.Name)
	w.raw(`,"source":`)
	w.str(string(s.Source))
	w.raw(`,"field":`)
	if s.Field == nil {
		w.raw("null")
	} else {
		w.str(*s.Field)
	}
	w.raw("}")
}

func (g *Guard) writeJSON(w *jsonWriter) {
	w.raw(`{"kind":`)
	w.str(string(g.Kind))
	sel := func(key string, s *ControlSelector) {
		w.raw(`,"` + key + `":`)
		if s == nil {
			w.raw("null")
		} else {
			s.writeJSON(w)
		}
	}
	switch g.Kind {
	case GuardIn:
		sel("value", g.Value)
	case GuardAll, GuardAny:
		w.raw(`,"guards":[`)
		for i := range g.Guards {
			if i > 0 {
				w.raw(",")
			}
			g.Guards[i].writeJSON(w)
		}
		w.raw("]")
	case GuardNot:
		w.raw(`,"guard":`)
		if g.Inner == nil {
			w.raw("null")
		} else {
			g.Inner.writeJSON(w)
		}
	case GuardKOfN:
		w.raw(`,"count":`)
		w.uint(g.Count)
		w.raw(`,"values":[`)
		for i := range g.Values {
			if i > 0 {
				w.raw(",")
			}
			g.Values[i].writeJSON(w)
		}
		w.raw("]")
	case GuardKOfMap:
		w.raw(`,"count":`)
		w.uint(g.Count)
		sel("value", g.Value)
	}
	switch g.Kind {
	case GuardIn, GuardKOfN, GuardKOfMap:
		w.raw(`,"labels":`)
		w.strings(sortedCopy(g.Labels))
	}
	w.raw("}")
}

func (w *jsonWriter) head(kind NodeKind, name string) {
	w.raw(`{"kind":`)
	w.str(string(kind))
	w.raw(`,"name":`)
	w.str(name)
}

func (w *jsonWriter) instructions(s *string) {
	if s != nil {
		w.raw(`,"instructions":`)
		w.str(*s)
	}
}

func (n *Step) writeJSON(w *jsonWriter) {
	w.head(KindStep, n.Name)
	w.raw(`,"worker":`)
	w.str(n.Worker)
	w.instructions(n.Instructions)
	w.raw(`,"input":`)
	n.Input.writeJSON(w)
	w.raw(`,"output":`)
	n.Output.writeJSON(w)
	w.raw(`,"inputBindings":`)
	w.inputBindings(n.InputBindings)
	w.raw(`,"writeBindings":`)
	w.writeBindings(n.WriteBindings)
	w.raw(`,"timeoutMs":`)
	w.uint(n.TimeoutMs)
	w.raw(`,"attempts":`)
	w.uint(n.Attempts)
	w.raw("}")
}

func (n *Verifier) writeJSON(w *jsonWriter) {
	w.head(KindVerifier, n.Name)
	w.raw(`,"worker":`)
	w.str(n.Worker)
	w.raw(`,"input":`)
	n.Input.writeJSON(w)
	w.raw(`,"output":`)
	n.Output.writeJSON(w)
	w.raw(`,"inputBindings":`)
	w.inputBindings(n.InputBindings)
	w.raw(`,"writeBindings":`)
	w.writeBindings(n.WriteBindings)
	w.raw(`,"timeoutMs":`)
	w.uint(n.TimeoutMs)
	w.raw(`,"attempts":`)
	w.uint(n.Attempts)
	w.raw(`,"signals":{`)
	fields := make([]string, 0, len(n.Signals))
	for k := range n.Signals {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	for i, k := range fields {
		w.key(k, i == 0)
		w.strings(sortedCopy(n.Signals[k]))
	}
	w.raw(`},"diagnostic":`)
	n.Diagnostic.writeJSON(w)
	w.instructions(n.Instructions)
	w.raw("}")
}

func (w *jsonWriter) nodes(ns []Node) {
	w.raw("[")
	for i, c := range ns {
		if i > 0 {
			w.raw(",")
		}
		writeNode(w, c)
	}
	w.raw("]")
}

func (n *Seq) writeJSON(w *jsonWriter) {
	w.head(KindSeq, n.Name)
	w.raw(`,"state":`)
	n.State.writeJSON(w)
	w.raw(`,"children":`)
	w.nodes(n.Children)
	w.raw(`,"promotedStatePaths":`)
	w.paths(n.PromotedStatePaths)
	w.raw("}")
}

func (n *Choice) writeJSON(w *jsonWriter) {
	w.head(KindChoice, n.Name)
	w.raw(`,"state":`)
	n.State.writeJSON(w)
	w.raw(`,"branches":[`)
	for i := range n.Branches {
		if i > 0 {
			w.raw(",")
		}
		w.raw(`{"when":`)
		n.Branches[i].When.writeJSON(w)
		w.raw(`,"node":`)
		writeNode(w, n.Branches[i].Node)
		w.raw("}")
	}
	w.raw(`],"otherwise":`)
	writeNode(w, n.Otherwise)
	w.raw(`,"promotedStatePaths":`)
	w.paths(n.PromotedStatePaths)
	w.raw("}")
}

func (n *Par) writeJSON(w *jsonWriter) {
	w.head(KindPar, n.Name)
	w.raw(`,"state":`)
	n.State.writeJSON(w)
	w.raw(`,"branches":`)
	w.nodes(n.Branches)
	w.raw(`,"promotedStatePaths":`)
	w.paths(n.PromotedStatePaths)
	w.raw(`,"join":{"kind":`)
	w.str(string(n.Join.Kind))
	switch n.Join.Kind {
	case JoinQuorum:
		w.raw(`,"count":`)
		w.uint(n.Join.Count)
	case JoinFirst:
		w.raw(`,"when":`)
		if n.Join.When == nil {
			w.raw("null")
		} else {
			n.Join.When.writeJSON(w)
		}
	}
	w.raw("}}")
}

func (n *Loop) writeJSON(w *jsonWriter) {
	w.head(KindLoop, n.Name)
	w.raw(`,"state":`)
	n.State.writeJSON(w)
	w.raw(`,"body":`)
	writeNode(w, n.Body)
	if n.Until != nil {
		w.raw(`,"until":`)
		n.Until.writeJSON(w)
	}
	w.raw(`,"maxIterations":`)
	w.uint(n.MaxIterations)
	w.raw(`,"promotedStatePaths":`)
	w.paths(n.PromotedStatePaths)
	w.raw("}")
}

func (n *Map) writeJSON(w *jsonWriter) {
	w.head(KindMap, n.Name)
	w.raw(`,"state":`)
	n.State.writeJSON(w)
	w.raw(`,"body":`)
	writeNode(w, n.Body)
	w.raw(`,"over":`)
	n.Over.writeJSON(w)
	w.raw(`,"maxItems":`)
	w.uint(n.MaxItems)
	w.raw(`,"promotedStatePaths":`)
	w.paths(n.PromotedStatePaths)
	w.raw("}")
}

func (n *Succeed) writeJSON(w *jsonWriter) {
	w.head(KindSucceed, n.Name)
	w.raw(`,"output":`)
	n.Output.writeJSON(w)
	w.raw(`,"bindings":`)
	w.inputBindings(n.Bindings)
	w.raw("}")
}

func (n *Fail) writeJSON(w *jsonWriter) {
	w.head(KindFail, n.Name)
	w.raw(`,"reason":`)
	w.str(n.Reason)
	w.raw("}")
}
