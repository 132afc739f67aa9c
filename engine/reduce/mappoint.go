package reduce

// mapPoint is what a memo keeps of a map visit: each item whose
// evaluation ended met nothing a later history could change, as it ended
// (nil: an item evaluated again each time). It is recorded, and used, only
// when the evaluation was clean where the map began: the map's base
// context is then the same in every later reduction of the run (see
// loopPoint), and so is such an item's evaluation.
type mapPoint struct {
	items []*itemPoint
}

// itemPoint is one map item's evaluation, replayed instead of evaluating
// the item again: its result, its context (the state, the written set and
// only the facts that differ from the map's base), and what it consumed,
// claimed and visited, in order.
type itemPoint struct {
	r        res
	ctx      *ctx
	consumed []uint64
	claims   []claimed
	visits   []string
}

// mark is where the evaluation's logs stood when an item began.
type mark struct {
	consumed, claims, visits, dirt, resumes int
}

func (e *evaluator) mark() mark {
	return mark{len(e.consumeLog), len(e.claimLog), len(e.visitLog), e.dirt, len(e.resumedKeys)}
}

// mapPointOf returns the kept items of map visit key with n items (nil
// when there is none or key is empty) and starts the next ones.
func (e *evaluator) mapPointOf(key string, n int) (kept, next []*itemPoint) {
	if key == "" || !e.clean {
		return nil, nil
	}
	e.memo.mu.Lock()
	pt, ok := e.memo.maps.get(key)
	e.memo.mu.Unlock()
	if ok && len(pt.items) == n {
		kept = pt.items
	}
	return kept, make([]*itemPoint, n)
}

// keepMapPoint records the items of map visit key.
func (e *evaluator) keepMapPoint(key string, items []*itemPoint) {
	e.memo.mu.Lock()
	e.memo.maps.cur[key] = &mapPoint{items: items}
	e.memo.mu.Unlock()
}

// itemSince is the item point of an item evaluated since mk with result r
// and context ic (from base), or nil when the evaluation met something a
// later history could change, resumed a loop point, or did not complete.
func (e *evaluator) itemSince(mk mark, r res, ic, base *ctx) *itemPoint {
	if r.st != stContinue || e.dirt != mk.dirt || len(e.resumedKeys) != mk.resumes || e.unsure {
		return nil
	}
	slim := &ctx{state: ic.state, item: ic.item, hasItem: ic.hasItem, scope: ic.scope, written: ic.written,
		controls: map[ctrlKey]ctrlVal{}, channels: map[chanKey]*channel{}, visits: map[string]int{}}
	slim.mergeChanged(ic, base)
	for k, v := range ic.visits {
		if base.visits[k] != v {
			slim.visits[k] = v
		}
	}
	return &itemPoint{r: r, ctx: slim, consumed: uniq(e.consumeLog[mk.consumed:]),
		claims: append([]claimed(nil), e.claimLog[mk.claims:]...), visits: append([]string(nil), e.visitLog[mk.visits:]...)}
}

// replay does what evaluating the item of ip again would do to the
// evaluator in pass p (counting loop and map visits only where they are
// counted).
func (e *evaluator) replay(ip *itemPoint, p pass) {
	for _, id := range ip.consumed {
		x, _ := e.h.entry(id)
		e.consume(x)
	}
	for _, c := range ip.claims {
		if c.c.cutoff < e.resumed.cutoff {
			e.unsure = true
		}
		e.claim(c.id, c.c)
	}
	if p.dispatches() {
		for _, vk := range ip.visits {
			e.loopVisits[vk]++
			e.visitLog = append(e.visitLog, vk)
		}
	}
}

// uniq is ids without repeats, in first-seen order.
func uniq(ids []uint64) []uint64 {
	seen := make(map[uint64]bool, len(ids))
	out := make([]uint64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
