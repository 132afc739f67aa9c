package reduce

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/oecp/oecp/graph"
)

// graphIndex is what the reducer precomputes about the graph.
type graphIndex struct {
	nodes map[string]graph.Node
	// depth is the number of maps enclosing each node (a map's own depth
	// excludes itself): the length of its controls' map indices.
	depth map[string]int
	// subtree lists, per node, the names of its subtree (itself included).
	subtree map[string]map[string]bool
	// errorRouted holds the executables whose `error` control some guard of
	// the graph reads: their exhausted failures are routed, not held.
	errorRouted map[string]bool
}

func indexGraph(g *graph.GraphSpec) (*graphIndex, error) {
	if g == nil || g.Root == nil {
		return nil, errf(ErrInvalidGraph, "graph has no root")
	}
	ix := &graphIndex{
		nodes:       map[string]graph.Node{},
		depth:       map[string]int{},
		subtree:     map[string]map[string]bool{},
		errorRouted: map[string]bool{},
	}
	var walk func(n graph.Node, depth, level int) error
	walk = func(n graph.Node, depth, level int) error {
		if n == nil {
			return errf(ErrInvalidGraph, "nil node")
		}
		if level > graph.MaxGraphDepth {
			return errf(ErrInvalidGraph, "graph deeper than %d", graph.MaxGraphDepth)
		}
		name := n.NodeName()
		if _, dup := ix.nodes[name]; dup {
			return errf(ErrInvalidGraph, "duplicate node name %q", name)
		}
		ix.nodes[name] = n
		ix.depth[name] = depth
		set := map[string]bool{name: true}
		ix.subtree[name] = set
		childDepth := depth
		switch t := n.(type) {
		case *graph.Step, *graph.Verifier:
		case *graph.Map:
			childDepth++
		case *graph.Par:
			if t.Join.Kind == graph.JoinFirst && t.Join.When == nil {
				return errf(ErrInvalidGraph, "par %q: first join without a guard", name)
			}
		case *graph.Seq, *graph.Choice, *graph.Loop, *graph.Succeed, *graph.Fail:
		default:
			return errf(ErrInvalidGraph, "unknown node kind %T", n)
		}
		for _, gd := range graph.Guards(n) {
			for _, s := range gd.Selectors() {
				if s.Source == graph.ControlError {
					ix.errorRouted[s.Name] = true
				}
			}
		}
		if ch, ok := n.(*graph.Choice); ok {
			for _, b := range ch.Branches {
				if b.Node == nil {
					return errf(ErrInvalidGraph, "choice %q: nil branch", name)
				}
			}
		}
		for _, c := range graph.Children(n) {
			if err := walk(c, childDepth, level+1); err != nil {
				return err
			}
			for e := range ix.subtree[c.NodeName()] {
				set[e] = true
			}
		}
		return nil
	}
	if err := walk(g.Root, 0, 1); err != nil {
		return nil, err
	}
	return ix, nil
}

// entry is a recorded execution with its canonical input.
type entry struct {
	Execution
	input string
}

// visit is one visit of an occurrence: its attempts in order and the retry
// grants that extend its budget.
type visit struct {
	entries []*entry
	grants  uint64
}

type historyIndex struct {
	// visitable counts the executions that are not interrupted; voided
	// lists the voided ones.
	visitable int
	voided    []uint64
	byOcc     map[string][]*visit
	byID      map[uint64]*entry
	// base holds more entries by id (read-only: a memo's base index).
	base    map[uint64]*entry
	niOcc   map[string]uint64
	occOfNI map[uint64]string
	nextNI  uint64
	nextEx  uint64
}

// entry is the entry of execution id.
func (hi *historyIndex) entry(id uint64) (*entry, bool) {
	if e, ok := hi.byID[id]; ok {
		return e, true
	}
	e, ok := hi.base[id]
	return e, ok
}

// each calls fn on every entry, until it returns an error.
func (hi *historyIndex) each(fn func(id uint64, e *entry) error) error {
	for _, m := range []map[uint64]*entry{hi.base, hi.byID} {
		for id, e := range m {
			if err := fn(id, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func newHistoryIndex() *historyIndex {
	return &historyIndex{byOcc: map[string][]*visit{}, byID: map[uint64]*entry{}, niOcc: map[string]uint64{}, occOfNI: map[uint64]string{}, nextNI: 1, nextEx: 1}
}

// admit checks one recorded execution against those admitted before and
// records it by id, with its node instance; it returns its entry and
// occurrence key. It does not group it into visits.
func (hi *historyIndex) admit(ix *graphIndex, x Execution, m *Memo) (*entry, string, error) {
	if err := checkExecution(ix, hi, x); err != nil {
		return nil, "", err
	}
	cin, err := m.canonicalOf(x.Input)
	if err != nil {
		return nil, "", err
	}
	occ := occKey(x.Occurrence.Node, x.Occurrence.MapIndices)
	if o, seen := hi.occOfNI[x.NodeInstance]; seen && o != occ {
		return nil, "", errf(ErrInconsistentHistory, "node instance %d names two occurrences", x.NodeInstance)
	}
	if ni, seen := hi.niOcc[occ]; seen && ni != x.NodeInstance {
		return nil, "", errf(ErrInconsistentHistory, "occurrence %s has two node instances", x.Occurrence.Node)
	}
	hi.occOfNI[x.NodeInstance] = occ
	hi.niOcc[occ] = x.NodeInstance
	e := &entry{Execution: x, input: cin}
	hi.byID[x.Execution] = e
	if x.State != StateInterrupted {
		// An interrupted execution is no attempt of its visit: the same
		// attempt is dispatched again.
		hi.visitable++
	}
	if x.State == StateVoided {
		hi.voided = append(hi.voided, x.Execution)
	}
	hi.nextNI = max(hi.nextNI, x.NodeInstance+1)
	hi.nextEx = max(hi.nextEx, x.Execution+1)
	return e, occ, nil
}

func idxKey(idx []uint64) string {
	var b strings.Builder
	for i, x := range idx {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(x, 10))
	}
	return b.String()
}

func occKey(node string, idx []uint64) string { return node + "\x00" + idxKey(idx) }

func hasPrefix(idx, prefix []uint64) bool {
	return len(idx) >= len(prefix) && slices.Equal(idx[:len(prefix)], prefix)
}

var errorCodes = map[string]bool{"timeout": true, "crash": true, "malformed": true, "refusal": true}

// indexHistory runs the history checks that need no evaluation and groups
// each occurrence's executions into visits (a new visit starts at attempt 1).
func indexHistory(ix *graphIndex, h History, m *Memo) (*historyIndex, error) {
	if m != nil && len(h.Grants) == 0 {
		return m.index(ix, h)
	}
	hi := newHistoryIndex()
	byOcc := map[string][]*entry{}
	for i := range h.size() {
		e, occ, err := hi.admit(ix, *h.at(i), m)
		if err != nil {
			return nil, err
		}
		if e.State != StateInterrupted {
			byOcc[occ] = append(byOcc[occ], e)
		}
	}

	visitOf := map[uint64]*visit{}
	for _, ok := range slices.Sorted(maps.Keys(byOcc)) { // the first error is the same every time
		vs, err := groupVisits(byOcc[ok], visitOf)
		if err != nil {
			return nil, err
		}
		hi.byOcc[ok] = vs
	}
	granted := map[uint64]bool{}
	for _, g := range h.Grants {
		e, ok := hi.byID[g.Execution]
		if !ok || e.State != StateSettled || e.Outcome.Status != OutcomeError {
			return nil, errf(ErrInconsistentHistory, "retry grant names execution %d, which did not fail", g.Execution)
		}
		if !granted[g.Execution] {
			granted[g.Execution] = true
			visitOf[g.Execution].grants++
		}
	}
	return hi, nil
}

// checkExecution checks one recorded execution on its own: ids and
// positions in range, an id not seen before in hi, an executable of the
// graph at its map depth, an attempt from 1, and a well-formed state.
func checkExecution(ix *graphIndex, hi *historyIndex, x Execution) error {
	if x.Execution == 0 || x.NodeInstance == 0 || x.Execution > MaxIdentity || x.NodeInstance > MaxIdentity {
		return errf(ErrIdentityOutOfRange, "execution %d / node instance %d out of range", x.Execution, x.NodeInstance)
	}
	if _, dup := hi.entry(x.Execution); dup {
		return errf(ErrInconsistentHistory, "duplicate execution id %d", x.Execution)
	}
	if x.DispatchPosition == 0 || x.DispatchPosition > MaxPosition || x.Position > MaxPosition {
		return errf(ErrIdentityOutOfRange, "execution %d: position out of range", x.Execution)
	}
	n, ok := ix.nodes[x.Occurrence.Node]
	if !ok || (n.NodeKind() != graph.KindStep && n.NodeKind() != graph.KindVerifier) {
		return errf(ErrInconsistentHistory, "execution %d: %q is not an executable of the graph", x.Execution, x.Occurrence.Node)
	}
	if len(x.Occurrence.MapIndices) != ix.depth[x.Occurrence.Node] {
		return errf(ErrInconsistentHistory, "execution %d: %d map indices for %q at map depth %d", x.Execution, len(x.Occurrence.MapIndices), x.Occurrence.Node, ix.depth[x.Occurrence.Node])
	}
	if x.Attempt == 0 {
		return errf(ErrInconsistentHistory, "execution %d: attempt 0", x.Execution)
	}
	switch x.State {
	case StateActive:
	case StateSettled:
		if x.Outcome == nil || x.Position <= x.DispatchPosition {
			return errf(ErrInconsistentHistory, "execution %d: settled without an outcome after its dispatch", x.Execution)
		}
		switch x.Outcome.Status {
		case OutcomeVerified, OutcomeVerifier:
		case OutcomeError:
			if !errorCodes[x.Outcome.Code] {
				return errf(ErrInconsistentHistory, "execution %d: unknown error code %q", x.Execution, x.Outcome.Code)
			}
		default:
			return errf(ErrInconsistentHistory, "execution %d: unknown outcome status %q", x.Execution, x.Outcome.Status)
		}
	case StateVoided:
		if (x.VoidReason != VoidParallelJoin && x.VoidReason != VoidMapTerminal) || x.Position <= x.DispatchPosition {
			return errf(ErrInconsistentHistory, "execution %d: bad void", x.Execution)
		}
	case StateInterrupted:
		if x.Position <= x.DispatchPosition {
			return errf(ErrInconsistentHistory, "execution %d: interrupted before its dispatch", x.Execution)
		}
	default:
		return errf(ErrInconsistentHistory, "execution %d: unknown state %q", x.Execution, x.State)
	}
	return nil
}

// groupVisits sorts one occurrence's executions by dispatch and cuts them
// into visits: each visit is a chain of attempts 1, 2, … where every
// non-final attempt failed before the next was dispatched. visitOf records
// each execution's visit.
func groupVisits(es []*entry, visitOf map[uint64]*visit) ([]*visit, error) {
	slices.SortFunc(es, func(a, b *entry) int {
		return cmp.Or(cmp.Compare(a.DispatchPosition, b.DispatchPosition), cmp.Compare(a.Execution.Execution, b.Execution.Execution))
	})
	var vs []*visit
	for _, e := range es {
		var err error
		if vs, err = appendVisit(vs, e, false); err != nil {
			return nil, err
		}
		visitOf[e.Execution.Execution] = vs[len(vs)-1]
	}
	return vs, nil
}

// errOutOfOrder: an execution joins its occurrence's visits before one
// already there (only the memo's incremental index meets it: the full
// index sorts first).
var errOutOfOrder = errors.New("reduce: execution indexed out of dispatch order")

// appendVisit adds e, dispatched after every entry of vs (its
// occurrence's visits), to vs: a new visit at attempt 1, else the next
// attempt of the last visit, which must have failed before e was
// dispatched. With cow it changes nothing that vs shares.
func appendVisit(vs []*visit, e *entry, cow bool) ([]*visit, error) {
	if n := len(vs); n > 0 {
		last := vs[n-1].entries[len(vs[n-1].entries)-1]
		if last.DispatchPosition == e.DispatchPosition {
			return nil, errf(ErrInconsistentHistory, "occurrence %s dispatched twice at position %d", e.Occurrence.Node, e.DispatchPosition)
		}
		if last.DispatchPosition > e.DispatchPosition {
			return nil, errOutOfOrder
		}
	}
	if e.Attempt == 1 {
		if cow {
			vs = slices.Clip(vs)
		}
		return append(vs, &visit{entries: []*entry{e}}), nil
	}
	if len(vs) == 0 {
		return nil, errf(ErrInconsistentHistory, "execution %d: attempt %d without attempt 1", e.Execution.Execution, e.Attempt)
	}
	cur := vs[len(vs)-1]
	prev := cur.entries[len(cur.entries)-1]
	if e.Attempt != prev.Attempt+1 {
		return nil, errf(ErrInconsistentHistory, "execution %d: attempt %d follows attempt %d", e.Execution.Execution, e.Attempt, prev.Attempt)
	}
	if prev.State != StateSettled || prev.Outcome.Status != OutcomeError || prev.Position >= e.DispatchPosition {
		return nil, errf(ErrInconsistentHistory, "execution %d: re-dispatched although attempt %d did not fail first", e.Execution.Execution, prev.Attempt)
	}
	if cow {
		cur = &visit{entries: slices.Clip(cur.entries), grants: cur.grants}
		vs = append(slices.Clip(vs[:len(vs)-1]), cur)
	}
	cur.entries = append(cur.entries, e)
	return vs, nil
}
