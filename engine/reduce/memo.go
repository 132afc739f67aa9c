package reduce

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/oecp/oecp/graph"
)

// Memo carries work from one reduction of a run to the next: each
// distinct input's canonical form and each distinct output's parsed value
// (what a reduction did not look up is dropped after the next one), the
// index of the run's ended executions (baseIndex), where its loops stood
// (loopPoint) and the items of its maps that are done (mapPoint), so that
// a reduction costs about the same however long the run's history is. A
// reduction with a memo returns what one without returns, except the
// trace decisions (continue, promote), which it does not report. Keep one
// Memo per run, and never run two reductions with it at once: a reduction
// extends its index of ended executions in place.
type Memo struct {
	mu     sync.Mutex
	values cache[any]
	canons cache[string]
	// loops and maps are the loop and map points of the last reductions,
	// of graph g and initial input seed under the retry grants named by
	// grants.
	loops cache[*loopPoint]
	maps  cache[*mapPoint]
	// spoilt holds the loop visits whose points a reduction resumed from
	// and then reduced again without the memo: they keep none.
	spoilt map[string]bool
	g      *graph.GraphSpec
	seed   string
	grants string
	// base is the index of the run's ended executions (under idxMu).
	idxMu sync.Mutex
	base  *baseIndex
}

// loopPoint is where a reduction stood after a loop visit's iteration
// ended, recorded only while the evaluation had met nothing a later
// history could change: no pending node (but the losers of a par that
// joined), no active execution, no decision (the trace decisions are not
// kept), every voided execution met so far claimed as Reduce requires. A
// run's history only grows (an ended execution never changes, new
// executions are dispatched at its frontier), so a later reduction of the
// run reaches the same point with the same state and resumes there
// instead of evaluating those iterations again. Two things a full
// evaluation could do differently are detected, and the run reduced again
// without the memo: consuming after the point an execution dispatched
// before it (a loser's execution the next iteration matches again, which
// the point counted already), and claiming after the point at a cutoff
// below one made before it (which might have changed an earlier claim;
// only a history out of order has it). The Memo's contract is that history: each reduction
// with a memo is of a history that extends the one before, under the same
// graph, initial input and retry grants (the memo drops its loop points
// when one of these changes).
type loopPoint struct {
	iter   uint64 // iterations done
	ctx    *ctx   // the loop's context after them
	pos    uint64
	cover  cover
	visits map[string]int
}

// cache maps bytes to what was derived from them: cur holds what the
// current reduction looked up, prev what the one before did.
type cache[T any] struct{ cur, prev map[string]T }

func (c *cache[T]) begin() { c.prev, c.cur = c.cur, map[string]T{} }

func (c *cache[T]) get(k string) (T, bool) {
	v, ok := c.cur[k]
	if !ok {
		if v, ok = c.prev[k]; ok {
			c.cur[k] = v
		}
	}
	return v, ok
}

// ReduceWith is Reduce with a memo (nil: none): the same result, without
// the trace decisions when m is not nil.
func ReduceWith(g *graph.GraphSpec, initialInput json.RawMessage, h History, m *Memo) (Result, error) {
	return reduce(g, initialInput, h, false, m)
}

// ReduceNativeWith is ReduceNative with a memo (nil: none), as
// ReduceWith.
func ReduceNativeWith(g *graph.GraphSpec, initialInput json.RawMessage, h History, m *Memo) (Result, error) {
	if len(h.Grants) > 0 {
		return Result{}, errf(ErrInconsistentHistory, "a native history has no retry grants")
	}
	return reduce(g, initialInput, h, true, m)
}

// begin starts a reduction: what the last one did not look up goes, and
// every loop point when the graph, the initial input or the grants are
// not those of the last one.
func (m *Memo) begin(g *graph.GraphSpec, seed json.RawMessage, h History) {
	if m == nil {
		return
	}
	ids := make([]uint64, 0, len(h.Grants))
	for _, gr := range h.Grants {
		ids = append(ids, gr.Execution)
	}
	slices.Sort(ids)
	grants := fmt.Sprint(slices.Compact(ids))
	m.mu.Lock()
	m.values.begin()
	m.canons.begin()
	m.loops.begin()
	m.maps.begin()
	newGraph := g != m.g
	if newGraph || string(seed) != m.seed || grants != m.grants {
		m.loops.prev, m.maps.prev, m.spoilt = nil, nil, nil
		m.g, m.seed, m.grants = g, string(seed), grants
	}
	m.mu.Unlock()
	// idxMu is never taken under mu: building the index takes mu under
	// idxMu (canonicalOf).
	if newGraph {
		m.idxMu.Lock()
		m.base = nil
		m.idxMu.Unlock()
	}
}

// resumeLoop counts a visit of loop name at local's scope and returns its
// key (empty outside the memo or the decide pass, when the evaluation is
// not clean, and under a par's or map's second pass) and the iterations
// done: those of its loop point, where local, pos and the evaluator then
// stand, or none.
func (e *evaluator) resumeLoop(name string, p pass, local **ctx, pos *uint64) (string, uint64) {
	key := e.visitKey(name, (*local).scope, p)
	if key == "" || !e.clean || e.second > 0 {
		return "", 0
	}
	e.memo.mu.Lock()
	pt, ok := e.memo.loops.get(key)
	e.memo.mu.Unlock()
	if !ok {
		return key, 0
	}
	e.resumedKeys = append(e.resumedKeys, key)
	*local, *pos = pt.ctx.clone(), pt.pos
	e.decisions = nil // a clean evaluation has none
	e.consumed, e.claims, e.unsettled, e.checked = map[uint64]bool{}, map[uint64]claim{}, nil, 0
	e.maxCutoff, e.maxDispatch = 0, 0
	e.resumed = pt.cover
	e.loopVisits = maps.Clone(pt.visits)
	return key, pt.iter
}

// visitKey counts a visit of the loop or map name at scope and returns
// its key: empty outside the memo or the passes that may dispatch.
func (e *evaluator) visitKey(name string, scope []uint64, p pass) string {
	if e.memo == nil || !p.dispatches() {
		return ""
	}
	vk := name + "\x00" + idxKey(scope)
	e.loopVisits[vk]++
	e.visitLog = append(e.visitLog, vk)
	return vk + "\x00" + strconv.Itoa(e.loopVisits[vk])
}

// keepLoopPoint records the loop point after iter iterations of the loop
// visit key, if the evaluation is still clean. (A loop under a par's or a
// map's second pass keeps none, see resumeLoop: its probe consumed what
// follows the point, which the point's count would take as before it.)
func (e *evaluator) keepLoopPoint(key string, iter uint64, local *ctx, pos uint64) {
	if key == "" || !e.clean || e.unsure || !e.voidsClaimed() {
		return
	}
	// voidsClaimed: every unsettled execution consumed since is voided.
	cv := cover{consumed: e.resumed.consumed + len(e.consumed), voids: e.resumed.voids + len(e.unsettled),
		cutoff: max(e.resumed.cutoff, e.maxCutoff), dispatch: max(e.resumed.dispatch, e.maxDispatch)}
	pt := &loopPoint{iter: iter, ctx: local.clone(), pos: pos, cover: cv, visits: maps.Clone(e.loopVisits)}
	e.memo.mu.Lock()
	if !e.memo.spoilt[key] {
		e.memo.loops.cur[key] = pt
	}
	e.memo.mu.Unlock()
}

// voidsClaimed reports whether every unsettled execution consumed so far
// is voided and claimed as Reduce requires (checked once each).
func (e *evaluator) voidsClaimed() bool {
	for ; e.checked < len(e.unsettled); e.checked++ {
		x, _ := e.h.entry(e.unsettled[e.checked])
		if x.State != StateVoided || !e.claimedOK(x) {
			return false
		}
	}
	return true
}

// covers reports whether an evaluation that resumed from a loop point
// stands for the full one: nothing unsure, every execution that is not
// interrupted consumed (before the point or since), and every voided one
// claimed as Reduce requires (those since the point checked here).
func (e *evaluator) covers() bool {
	if len(e.resumedKeys) == 0 {
		return true
	}
	if e.unsure || e.resumed.consumed+len(e.consumed) != e.h.visitable {
		return false
	}
	voids := e.resumed.voids
	for _, id := range e.unsettled {
		x, _ := e.h.entry(id)
		if x.State == StateVoided {
			if !e.claimedOK(x) {
				return false
			}
			voids++
		}
	}
	return voids == len(e.h.voided)
}

// memoize returns c's entry for raw, deriving and keeping it on a miss.
func memoize[T any](m *Memo, c *cache[T], raw json.RawMessage, derive func(json.RawMessage) (T, error)) (T, error) {
	if m == nil {
		return derive(raw)
	}
	m.mu.Lock()
	v, ok := c.get(string(raw))
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := derive(raw)
	if err != nil {
		return v, err
	}
	m.mu.Lock()
	c.cur[string(raw)] = v
	m.mu.Unlock()
	return v, nil
}

// value parses a recorded value (an output or a diagnostic); the result
// is shared and must not be modified (the reducer's values are
// copy-on-write).
func (m *Memo) value(raw json.RawMessage) (any, error) {
	var c *cache[any]
	if m != nil {
		c = &m.values
	}
	return memoize(m, c, raw, parseValue)
}

// canonicalOf is the canonical form of a recorded input.
func (m *Memo) canonicalOf(raw json.RawMessage) (string, error) {
	var c *cache[string]
	if m != nil {
		c = &m.canons
	}
	return memoize(m, c, raw, func(raw json.RawMessage) (string, error) {
		v, err := parseValue(raw)
		if err != nil {
			return "", err
		}
		b, err := canonical(v)
		return string(b), err
	})
}

// baseIndex is a memo's history index of the longest prefix of a run's
// history whose executions had all ended when it was last reduced
// (ended executions never change), extended in place as the history
// grows; a reduction indexes only what follows it, on a copy.
type baseIndex struct {
	execs []Execution
	ended *Execution // the History.Ended its prefix came from
	hi    *historyIndex
}

// index is indexHistory with the memo's base index, for a history
// without grants. An error may be errOutOfOrder, which the full index
// would not meet: the caller reduces again without the memo.
func (m *Memo) index(ix *graphIndex, h History) (*historyIndex, error) {
	m.idxMu.Lock()
	defer m.idxMu.Unlock()
	b, k := m.base, 0
	switch {
	case b == nil:
	case b.ended == unsafe.SliceData(h.Ended) && len(b.execs) <= len(h.Ended):
		k = len(b.execs) // the same shared slice, only appended to
	default:
		for k < len(b.execs) && k < h.size() && sameExecution(&b.execs[k], h.at(k)) {
			k++
		}
	}
	if b == nil || k < len(b.execs) {
		b, k = &baseIndex{hi: newHistoryIndex()}, 0
	}
	m.base = nil // until it is extended
	j := k
	for j < h.size() && h.at(j).State != StateActive {
		j++
	}
	for i := k; i < j; i++ {
		x := h.at(i)
		if err := b.hi.add(ix, *x, m, false); err != nil {
			return nil, err
		}
		b.execs = append(b.execs, *x)
	}
	b.ended = unsafe.SliceData(h.Ended)
	m.base = b
	hi := b.hi.overlay()
	for i := j; i < h.size(); i++ {
		if err := hi.add(ix, *h.at(i), m, true); err != nil {
			return nil, err
		}
	}
	return hi, nil
}

// add admits x and adds it to its occurrence's visits (cow: without
// changing what hi shares).
func (hi *historyIndex) add(ix *graphIndex, x Execution, m *Memo, cow bool) error {
	e, occ, err := hi.admit(ix, x, m)
	if err != nil || e.State == StateInterrupted {
		return err
	}
	vs, err := appendVisit(hi.byOcc[occ], e, cow)
	if err != nil {
		return err
	}
	hi.byOcc[occ] = vs
	return nil
}

// overlay is a copy of hi that a reduction may extend (copy on write of
// the visits) and change.
func (hi *historyIndex) overlay() *historyIndex {
	return &historyIndex{visitable: hi.visitable, voided: slices.Clip(hi.voided), byOcc: maps.Clone(hi.byOcc),
		byID: map[uint64]*entry{}, base: hi.byID, niOcc: maps.Clone(hi.niOcc), occOfNI: maps.Clone(hi.occOfNI), nextNI: hi.nextNI, nextEx: hi.nextEx}
}

// sameExecution reports whether a and b record the same execution alike.
func sameExecution(a, b *Execution) bool {
	if a.Execution != b.Execution || a.NodeInstance != b.NodeInstance || a.DispatchPosition != b.DispatchPosition ||
		a.Position != b.Position || a.State != b.State || a.Attempt != b.Attempt || a.VoidReason != b.VoidReason ||
		a.Occurrence.Node != b.Occurrence.Node || !slices.Equal(a.Occurrence.MapIndices, b.Occurrence.MapIndices) ||
		!bytes.Equal(a.Input, b.Input) {
		return false
	}
	if a.Outcome == b.Outcome {
		return true
	}
	if a.Outcome == nil || b.Outcome == nil {
		return false
	}
	x, y := a.Outcome, b.Outcome
	return x.Status == y.Status && x.Code == y.Code && x.Reason == y.Reason && bytes.Equal(x.Output, y.Output) &&
		bytes.Equal(x.Diagnostic, y.Diagnostic) && maps.Equal(x.Signals, y.Signals)
}

// spoil drops the loop points of keys, and keeps none of them from now
// on, and the map points of the reduction (it is reduced again without
// the memo).
func (m *Memo) spoil(keys []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.maps.cur)
	for _, k := range keys {
		if m.spoilt == nil {
			m.spoilt = map[string]bool{}
		}
		m.spoilt[k] = true
		delete(m.loops.cur, k)
	}
}

// withoutTraces is a reduction less its trace decisions (continue,
// promote): a reduction with a memo that reduced again without it.
func withoutTraces(r Result, err error) (Result, error) {
	r.Decisions = slices.DeleteFunc(r.Decisions, func(d Decision) bool {
		return d.Kind == DecisionContinue || d.Kind == DecisionPromote
	})
	return r, err
}
