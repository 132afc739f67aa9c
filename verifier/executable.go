package verifier

import (
	"slices"
	"sort"

	"github.com/oecp/oecp/graph"
)

// channelType is the type of the output channel path a write binding reads:
// the out or diagnostic payload at path, or a signal as the enum of its labels.
func (a *analyzer) channelType(w graph.NodeOutputSelector) (graph.PayloadType, bool) {
	src := a.nodes[w.Node]
	var out graph.PayloadType
	var signals map[string][]string
	var dia *graph.PayloadType
	switch t := src.(type) {
	case *graph.Step:
		out = t.Output
	case *graph.Verifier:
		out, signals, dia = t.Output, t.Signals, &t.Diagnostic
	default:
		return out, false
	}
	switch w.Channel {
	case graph.ChannelOut:
		t, ok, _ := typeAt(out, w.Path)
		return t, ok
	case graph.ChannelDiagnostic:
		if dia == nil {
			return out, false
		}
		t, ok, _ := typeAt(*dia, w.Path)
		return t, ok
	case graph.ChannelSignal:
		labels, ok := signals[w.Path[0]]
		if !ok || len(w.Path) != 1 {
			return out, false
		}
		return graph.PayloadType{Kind: graph.PayloadEnum, Values: labels}, true
	}
	return out, false
}

// executable checks a step or verifier's input construction and write
// bindings and returns its outcome worlds.
func (a *analyzer) executable(n graph.Node, p graph.Path, ws []*world, sc scope, in graph.PayloadType,
	ibs []graph.InputBinding, wbs []graph.WriteBinding, signals map[string][]string) []*world {
	a.construct(p, ws, sc, in, ibs, "input", "inputBindings")
	for i, b := range wbs {
		a.checkWriteBinding(n.NodeName(), p.With(graph.FieldSeg("writeBindings"), graph.IndexSeg(i)), ws, sc, b)
	}
	return a.outcomes(n, p, ws, wbs, signals)
}

// checkWriteBinding checks write binding b (at bp) of executable name: the
// channel path it reads is declared and its type fits the state target, and
// when it reads another node's output, that node ran and succeeded on every
// reaching path.
func (a *analyzer) checkWriteBinding(name string, bp graph.Path, ws []*world, sc scope, b graph.WriteBinding) {
	related := []string{name}
	if b.Value.Node != name {
		related = append(related, b.Value.Node)
		sort.Strings(related)
	}
	vt, ok := a.channelType(b.Value)
	if !ok {
		a.emit(graph.CodeSchemaSafety, bp.With(graph.FieldSeg("value")), related, "write value selects an undeclared channel path")
	} else if tt, tok, mapFault := a.targetType(sc, b.Target); !tok {
		if !mapFault {
			a.emit(graph.CodeSchemaSafety, bp, related, "write target is not declared by the state type")
		}
	} else if !graph.IsSubtype(vt, tt) {
		a.emit(graph.CodeSchemaSafety, bp, related, "write value is not a subtype of its state target")
	}
	if b.Value.Node == name {
		return
	}
	notRan, errPath := false, false
	for _, w := range ws {
		a.m.charge(1)
		if !w.ran[b.Value.Node] {
			notRan = true
		} else if !w.ok[b.Value.Node] {
			errPath = true
		}
	}
	if notRan {
		a.emit(graph.CodeUndefinedRead, bp.With(graph.FieldSeg("value")), related, "node output %s does not dominate this read", b.Value.Node)
	} else if errPath {
		a.emit(graph.CodeUndefinedRead, bp.With(graph.FieldSeg("value")), related, "node output %s is unavailable on its error path", b.Value.Node)
	}
}

// outcomes returns the worlds in which executable n completes from each of
// ws: success once per combination of the labels of the signals some guard
// reads, with its write targets defined, and each of the four errors when
// some guard reads its error control (else one error world).
func (a *analyzer) outcomes(n graph.Node, p graph.Path, ws []*world, wbs []graph.WriteBinding, signals map[string][]string) []*world {
	name := n.NodeName()
	errKey := name + "|e"
	fields, combos := a.signalCombos(p, name, signals)
	track := a.chanRead[name]
	var outWs []*world
	for _, w := range ws {
		for _, c := range combos {
			s := w.clone()
			for i, f := range fields {
				s.set(name+"|s|"+f, c[i])
			}
			s.set(errKey, "")
			a.m.charge(len(fields) + len(wbs))
			for _, b := range wbs {
				s.top()[pathString(b.Target)] = true
			}
			if track {
				s.ran[name], s.ok[name] = true, true
			}
			outWs = append(outWs, s)
		}
		codes := []string{""}
		if a.relevant[errKey] {
			codes = errorCodes
		}
		for _, code := range codes {
			e := w.clone()
			for _, f := range fields {
				e.set(name+"|s|"+f, "")
			}
			e.set(errKey, code)
			if track {
				e.ran[name] = true
				delete(e.ok, name)
			}
			outWs = append(outWs, e)
		}
	}
	return a.check(outWs, p, n)
}

// signalCombos returns the signal fields of executable name that some guard
// reads, sorted, and every combination of their labels.
func (a *analyzer) signalCombos(p graph.Path, name string, signals map[string][]string) ([]string, [][]string) {
	var fields []string
	for _, f := range sortedKeys(signals) {
		if a.relevant[name+"|s|"+f] {
			fields = append(fields, f)
		}
	}
	combos := [][]string{{}}
	for _, f := range fields {
		var next [][]string
		for _, c := range combos {
			for _, l := range signals[f] {
				next = append(next, append(slices.Clone(c), l))
			}
		}
		combos = next
		if len(combos) > graph.MaxFiniteCheckAssignments {
			panic(assignmentCeiling(p, name))
		}
	}
	return fields, combos
}
