package reduce

import (
	"fmt"
	"slices"

	"github.com/oecp/oecp/graph"
)

// mapRun is one run of a map node over its items.
type mapRun struct {
	n     *graph.Map
	c     *ctx // the map's context
	base  *ctx // the copy every item starts from
	body  map[string]bool
	items []any
	// key is the map visit's key in the memo (empty: none), kept its
	// items kept by the last reduction, next those this one keeps.
	key        string
	kept, next []*itemPoint
}

func (e *evaluator) evalMap(n *graph.Map, c *ctx, p pass) (res, error) {
	items, err := mapItems(n, c)
	if err != nil {
		return res{}, err
	}
	if uint64(len(items)) > n.MaxItems {
		c.setControl(n.Name, graph.ControlGroup, strp("overflow"), c.scope, "overflow")
		e.emitContinue(p, n.Name)
		return res{st: stContinue, pos: 0}, nil
	}
	m := &mapRun{n: n, c: c, base: c.clone(), body: e.ix.subtree[n.Body.NodeName()], items: items}
	m.key = e.visitKey(n.Name, c.scope, p)
	m.kept, m.next = e.mapPointOf(m.key, len(items))
	// Per-item controls of an earlier run of this map (a map inside a loop)
	// do not leak into this run.
	for k, cv := range m.base.controls {
		if cv.label != "" && len(cv.indices) > len(c.scope) && hasPrefix(cv.indices, c.scope) && m.body[k.node] {
			m.base.controls[k] = ctrlVal{indices: cv.indices}
		}
	}
	results, ctxs, err := e.runItems(m, pass{decide: false, cutoff: p.cutoff})
	if err != nil {
		return res{}, err
	}
	if term := firstTerminal(results); term >= 0 {
		return e.mapTerminal(m, term, results[term], p)
	}
	if p.decide {
		e.second++
		results, ctxs, err = e.runItems(m, p)
		e.second--
		if err != nil {
			return res{}, err
		}
	}
	var pos uint64
	for _, r := range results {
		if r.st != stContinue {
			return pending, nil
		}
		pos = max(pos, r.pos)
	}
	if err := e.mapPromote(m, ctxs, p); err != nil {
		return res{}, err
	}
	for k, cv := range m.base.controls {
		c.controls[k] = cv
	}
	for _, ic := range ctxs {
		c.mergeFacts(ic, m.base)
	}
	c.setControl(n.Name, graph.ControlGroup, strp("overflow"), c.scope, "ok")
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: pos}, nil
}

// mapItems returns the array a map runs over.
func mapItems(n *graph.Map, c *ctx) ([]any, error) {
	src, err := c.dataSource(n.Over.Source, fmt.Sprintf("map %q: ", n.Name))
	if err != nil {
		return nil, err
	}
	v, err := selectPath(src, n.Over.Path)
	if err != nil {
		return nil, err
	}
	items, ok := v.([]any)
	if !ok {
		return nil, errf(ErrInvalidDurableValue, "map %q: `over` is not an array", n.Name)
	}
	return items, nil
}

// itemCtx is the context of item i: the base copy at the item's scope with
// nothing written yet.
func (m *mapRun) itemCtx(i int) *ctx {
	ic := m.base.clone()
	ic.scope = append(slices.Clone(m.c.scope), uint64(i))
	ic.item, ic.hasItem = m.items[i], true
	ic.written = nil
	return ic
}

// runItems evaluates the body once per item with pass p, or replays the
// items the memo kept.
func (e *evaluator) runItems(m *mapRun, p pass) ([]res, []*ctx, error) {
	results := make([]res, len(m.items))
	ctxs := make([]*ctx, len(m.items))
	for i := range m.items {
		if m.kept != nil && m.kept[i] != nil {
			ip := m.kept[i]
			e.replay(ip, p)
			results[i], ctxs[i], m.next[i] = ip.r, ip.ctx, ip
			continue
		}
		ic := m.itemCtx(i)
		mk := e.mark()
		r, err := e.eval(m.n.Body, ic, p)
		if err != nil {
			return nil, nil, err
		}
		if m.next != nil && p.dispatches() {
			m.next[i] = e.itemSince(mk, r, ic, m.base)
		}
		results[i], ctxs[i] = r, ic
	}
	if m.next != nil && p.dispatches() {
		e.keepMapPoint(m.key, m.next)
	}
	return results, ctxs, nil
}

// firstTerminal returns the item whose terminal comes first (the lowest
// position, then the lowest index), or -1.
func firstTerminal(results []res) int {
	term := -1
	for i, r := range results {
		if r.st == stTerminal && (term < 0 || r.pos < results[term].pos) {
			term = i
		}
	}
	return term
}

// mapTerminal ends the map with item term's terminal t: in decide mode that
// item is decided up to t's position, and the unsettled executions of the
// other items are claimed as its losers.
func (e *evaluator) mapTerminal(m *mapRun, term int, t res, p pass) (res, error) {
	if p.decide {
		if _, err := e.eval(m.n.Body, m.itemCtx(term), pass{decide: true, cutoff: min(t.pos, p.cutoff)}); err != nil {
			return res{}, err
		}
	}
	scope := append(slices.Clone(m.c.scope), uint64(term))
	e.claimLosers(m.body, m.c.scope, scope, t.pos, VoidMapTerminal, p)
	return t, nil
}

// mapPromote copies out every promoted path as an array with one element
// per item, and emits the promote decision in decide mode.
func (e *evaluator) mapPromote(m *mapRun, ctxs []*ctx, p pass) error {
	c := m.c
	var vals []Promoted
	for _, P := range m.n.PromotedStatePaths {
		arr := make([]any, len(m.items))
		for i, ic := range ctxs {
			if isWritten(ic.written, P) { // an item that did not write P contributes null
				var err error
				if arr[i], err = selectPath(ic.state, P); err != nil {
					return err
				}
			}
		}
		var err error
		if c.state, err = setPath(c.state, P, arr); err != nil {
			return err
		}
		c.written = addWritten(c.written, P)
		if vals, err = e.appendPromoted(vals, p, P, arr); err != nil {
			return err
		}
	}
	e.emitPromote(m.n.Name, c.scope, vals)
	return nil
}
