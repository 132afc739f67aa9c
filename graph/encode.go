package graph

import (
	"slices"
	"strconv"
)

// Encoders write the reference field order with enum sets, signal maps and
// record fields sorted, in the reference's string escaping.

// MarshalJSON writes the graph in the reference field order. This is the
// form `get` returns as `spec`.
func (g GraphSpec) MarshalJSON() ([]byte, error) { return marshal(&g) }

func (g *GraphSpec) writeJSON(w *jsonWriter) { w.graph(g, nil) }

// MarshalJSON writes the payload type in reference order.
func (p PayloadType) MarshalJSON() ([]byte, error) { return marshal(&p) }

// MarshalJSON writes the guard in reference order.
func (g Guard) MarshalJSON() ([]byte, error) { return marshal(&g) }

// MarshalNode writes one node (and its subtree) in reference order.
func MarshalNode(n Node) ([]byte, error) {
	w := &jsonWriter{}
	w.node(n)
	return w.b, nil
}

// graph writes g and, when b is set, its bounds as a last member.
func (w *jsonWriter) graph(g *GraphSpec, b *Bounds) {
	if g == nil {
		w.raw("null")
		return
	}
	w.open()
	w.strMember("profile", g.Profile)
	w.valueMember("initialInput", &g.InitialInput)
	w.valueMember("policy", &g.Policy)
	w.nodeMember("root", g.Root)
	if b != nil {
		w.valueMember("bounds", b)
	}
	w.close()
}

func (p *PolicyBinding) writeJSON(w *jsonWriter) {
	w.strObject("policy", p.Policy, "default", p.Default)
}

// node writes n, or null for no node.
func (w *jsonWriter) node(n Node) {
	if n == nil {
		w.raw("null")
		return
	}
	n.writeJSON(w)
}

func (w *jsonWriter) strMember(k, s string) {
	w.member(k)
	w.str(s)
}

// strObject writes an object of string members given as key, value pairs.
func (w *jsonWriter) strObject(kv ...string) {
	w.open()
	for i := 0; i+1 < len(kv); i += 2 {
		w.strMember(kv[i], kv[i+1])
	}
	w.close()
}

func (w *jsonWriter) uintMember(k string, u uint64) {
	w.member(k)
	w.uint(u)
}

func (w *jsonWriter) valueMember(k string, v jsonValue) {
	w.member(k)
	v.writeJSON(w)
}

// setMember writes a label set sorted.
func (w *jsonWriter) setMember(k string, labels []string) {
	w.member(k)
	w.strings(sortedCopy(labels))
}

func (w *jsonWriter) nodesMember(k string, ns []Node) {
	w.member(k)
	w.array(len(ns), func(i int) { w.node(ns[i]) })
}

func (w *jsonWriter) pathsMember(k string, ps []FieldPath) {
	w.member(k)
	w.array(len(ps), func(i int) { w.strings(ps[i]) })
}

// nullable writes v, or null when isNil (a nil pointer held by v).
func (w *jsonWriter) nullable(isNil bool, v jsonValue) {
	if isNil {
		w.raw("null")
	} else {
		v.writeJSON(w)
	}
}

func (p *PayloadType) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("kind", string(p.Kind))
	switch p.Kind {
	case PayloadRecord:
		w.member("fields")
		w.open()
		for _, k := range sortedKeys(p.Fields) {
			f := p.Fields[k]
			w.member(k)
			w.open()
			w.valueMember("type", &f.Type)
			w.member("required")
			w.b = strconv.AppendBool(w.b, f.Required)
			w.close()
		}
		w.close()
	case PayloadArray:
		w.member("items")
		w.nullable(p.Items == nil, p.Items)
	case PayloadEnum:
		w.setMember("values", p.Values)
	}
	w.close()
}

func sortedCopy(ss []string) []string {
	if slices.IsSorted(ss) {
		return ss
	}
	return slices.Sorted(slices.Values(ss))
}

func (p FieldPath) writeJSON(w *jsonWriter) { w.strings(p) }

func (s *DataSelector) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("source", string(s.Source))
	w.valueMember("path", s.Path)
	w.close()
}

func (b *InputBinding) writeJSON(w *jsonWriter) {
	w.open()
	w.valueMember("target", b.Target)
	w.valueMember("value", &b.Value)
	w.close()
}

func (s *NodeOutputSelector) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("node", s.Node)
	w.strMember("channel", string(s.Channel))
	w.valueMember("path", s.Path)
	w.close()
}

func (b *WriteBinding) writeJSON(w *jsonWriter) {
	w.open()
	w.valueMember("value", &b.Value)
	w.valueMember("target", b.Target)
	w.close()
}

func (w *jsonWriter) inputBindings(k string, bs []InputBinding) {
	w.member(k)
	w.array(len(bs), func(i int) { bs[i].writeJSON(w) })
}

func (w *jsonWriter) writeBindings(bs []WriteBinding) {
	w.member("writeBindings")
	w.array(len(bs), func(i int) { bs[i].writeJSON(w) })
}

func (s *ControlSelector) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("name", s.Name)
	w.strMember("source", string(s.Source))
	w.member("field")
	if s.Field == nil {
		w.raw("null")
	} else {
		w.str(*s.Field)
	}
	w.close()
}

func (g *Guard) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("kind", string(g.Kind))
	if g.Kind == GuardKOfN || g.Kind == GuardKOfMap {
		w.uintMember("count", g.Count)
	}
	switch g.Kind {
	case GuardIn, GuardKOfMap:
		w.member("value")
		w.nullable(g.Value == nil, g.Value)
	case GuardAll, GuardAny:
		w.member("guards")
		w.array(len(g.Guards), func(i int) { g.Guards[i].writeJSON(w) })
	case GuardNot:
		w.member("guard")
		w.nullable(g.Inner == nil, g.Inner)
	case GuardKOfN:
		w.member("values")
		w.array(len(g.Values), func(i int) { g.Values[i].writeJSON(w) })
	}
	if g.Kind == GuardIn || g.Kind == GuardKOfN || g.Kind == GuardKOfMap {
		w.setMember("labels", g.Labels)
	}
	w.close()
}

// head opens a node and writes its kind and name.
func (w *jsonWriter) head(kind NodeKind, name string) {
	w.open()
	w.strMember("kind", string(kind))
	w.strMember("name", name)
}

// group opens a group node and writes its kind, name and state.
func (w *jsonWriter) group(kind NodeKind, name string, state *PayloadType) {
	w.head(kind, name)
	w.valueMember("state", state)
}

// closeGroup writes a group node's promotedStatePaths and closes it.
func (w *jsonWriter) closeGroup(promoted []FieldPath) {
	w.pathsMember("promotedStatePaths", promoted)
	w.close()
}

func (w *jsonWriter) nodeMember(k string, n Node) {
	w.member(k)
	w.node(n)
}

// instructions writes the optional instructions member; absent when nil.
func (w *jsonWriter) instructions(s *string) {
	if s != nil {
		w.strMember("instructions", *s)
	}
}

// executable writes the members a step and a verifier share, from input to
// attempts.
func (w *jsonWriter) executable(input, output *PayloadType, in []InputBinding, out []WriteBinding, timeoutMs, attempts uint64) {
	w.valueMember("input", input)
	w.valueMember("output", output)
	w.inputBindings("inputBindings", in)
	w.writeBindings(out)
	w.uintMember("timeoutMs", timeoutMs)
	w.uintMember("attempts", attempts)
}

func (n *Step) writeJSON(w *jsonWriter) {
	w.head(KindStep, n.Name)
	w.strMember("worker", n.Worker)
	w.instructions(n.Instructions)
	w.executable(&n.Input, &n.Output, n.InputBindings, n.WriteBindings, n.TimeoutMs, n.Attempts)
	w.close()
}

func (n *Verifier) writeJSON(w *jsonWriter) {
	w.head(KindVerifier, n.Name)
	w.strMember("worker", n.Worker)
	w.executable(&n.Input, &n.Output, n.InputBindings, n.WriteBindings, n.TimeoutMs, n.Attempts)
	w.member("signals")
	w.open()
	for _, k := range sortedKeys(n.Signals) {
		w.setMember(k, n.Signals[k])
	}
	w.close()
	w.valueMember("diagnostic", &n.Diagnostic)
	w.instructions(n.Instructions)
	w.close()
}

func (n *Seq) writeJSON(w *jsonWriter) {
	w.group(KindSeq, n.Name, &n.State)
	w.nodesMember("children", n.Children)
	w.closeGroup(n.PromotedStatePaths)
}

func (b *ChoiceBranch) writeJSON(w *jsonWriter) {
	w.open()
	w.valueMember("when", &b.When)
	w.nodeMember("node", b.Node)
	w.close()
}

func (n *Choice) writeJSON(w *jsonWriter) {
	w.group(KindChoice, n.Name, &n.State)
	w.member("branches")
	w.array(len(n.Branches), func(i int) { n.Branches[i].writeJSON(w) })
	w.nodeMember("otherwise", n.Otherwise)
	w.closeGroup(n.PromotedStatePaths)
}

func (j *Join) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("kind", string(j.Kind))
	switch j.Kind {
	case JoinQuorum:
		w.uintMember("count", j.Count)
	case JoinFirst:
		w.member("when")
		w.nullable(j.When == nil, j.When)
	}
	w.close()
}

func (n *Par) writeJSON(w *jsonWriter) {
	w.group(KindPar, n.Name, &n.State)
	w.nodesMember("branches", n.Branches)
	w.pathsMember("promotedStatePaths", n.PromotedStatePaths)
	w.valueMember("join", &n.Join)
	w.close()
}

func (n *Loop) writeJSON(w *jsonWriter) {
	w.group(KindLoop, n.Name, &n.State)
	w.nodeMember("body", n.Body)
	if n.Until != nil {
		w.valueMember("until", n.Until)
	}
	w.uintMember("maxIterations", n.MaxIterations)
	w.closeGroup(n.PromotedStatePaths)
}

func (n *Map) writeJSON(w *jsonWriter) {
	w.group(KindMap, n.Name, &n.State)
	w.nodeMember("body", n.Body)
	w.valueMember("over", &n.Over)
	w.uintMember("maxItems", n.MaxItems)
	w.closeGroup(n.PromotedStatePaths)
}

func (n *Succeed) writeJSON(w *jsonWriter) {
	w.head(KindSucceed, n.Name)
	w.valueMember("output", &n.Output)
	w.inputBindings("bindings", n.Bindings)
	w.close()
}

func (n *Fail) writeJSON(w *jsonWriter) {
	w.head(KindFail, n.Name)
	w.strMember("reason", n.Reason)
	w.close()
}
