package reduce

import (
	"cmp"
	"slices"

	"github.com/oecp/oecp/graph"
)

// parJoin is what a par's join asks for: how many completed branches it
// needs and the group control it sets (field, and the label when the join
// is reached or can no longer be reached).
type parJoin struct {
	need                        int
	field, reached, unreachable string
}

func joinOf(n *graph.Par) parJoin {
	j := parJoin{need: len(n.Branches), field: "joined", reached: "reached", unreachable: "quorum_unreachable"}
	switch n.Join.Kind {
	case graph.JoinAny:
		j.need = 1
	case graph.JoinFirst:
		j.need = 1
		j.field, j.reached, j.unreachable = "raced", "satisfied", "no_satisfier"
	case graph.JoinQuorum:
		j.need = int(min(n.Join.Count, uint64(len(n.Branches)+1)))
	}
	return j
}

// parBranch is the probe of one branch: its result and context, and whether
// it counts as completed for the join (a first join also needs its guard).
type parBranch struct {
	idx   int
	r     res
	ctx   *ctx
	done  bool
	dirty bool // its probe met something a later history could change
}

// branchCtx is a fresh context for one par branch: the par's copy-in with
// nothing written yet.
func branchCtx(in *ctx) *ctx {
	bc := in.clone()
	bc.written = nil
	return bc
}

func (e *evaluator) evalPar(n *graph.Par, c *ctx, p pass) (res, error) {
	in := c.clone()
	j := joinOf(n)
	clean, dirt := e.clean, e.dirt
	probes, completed, anyPending, err := e.probePar(n, in, p)
	if err != nil {
		return res{}, err
	}
	if len(completed) < j.need {
		return e.parShort(n, c, in, p, probes, anyPending, j)
	}
	slices.SortStableFunc(completed, func(a, b parBranch) int {
		return cmp.Or(cmp.Compare(a.r.pos, b.r.pos), cmp.Compare(a.idx, b.idx))
	})
	winners := completed[:j.need]
	var join uint64
	isWinner := map[int]bool{}
	// A par that joined never evaluates its losers again: what their
	// probes met that a later history could change (a pending path, a
	// voided execution) no longer matters, but an active execution, which
	// claimLosers meets again.
	e.clean, e.dirt = clean, dirt
	for _, w := range winners {
		join = max(join, w.r.pos)
		isWinner[w.idx] = true
		if w.dirty {
			e.soil()
		}
	}
	for _, b := range probes {
		if !isWinner[b.idx] {
			c.mergeVisits(b.ctx) // a loser's visits count too: the next loop iteration must not re-match them
		}
	}
	if err := e.joinWinners(n, c, in, winners, pass{decide: p.decide, cutoff: min(join, p.cutoff)}); err != nil {
		return res{}, err
	}
	if p.decide {
		if err := e.emitParPromote(n, c, p); err != nil {
			return res{}, err
		}
	}
	c.setControl(n.Name, graph.ControlGroup, strp(j.field), c.scope, j.reached)
	if j.need < len(n.Branches) {
		for i, b := range n.Branches {
			if !isWinner[i] {
				e.claimLosers(e.ix.subtree[b.NodeName()], c.scope, nil, join, VoidParallelJoin, p)
			}
		}
	}
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: join}, nil
}

// probePar evaluates every branch without deciding, at p's cutoff, and
// returns the probes, the completed ones and whether any is pending.
func (e *evaluator) probePar(n *graph.Par, in *ctx, p pass) (probes, completed []parBranch, anyPending bool, err error) {
	probes = make([]parBranch, len(n.Branches))
	for i, b := range n.Branches {
		bc := branchCtx(in)
		dirt := e.dirt
		r, err := e.eval(b, bc, pass{decide: false, cutoff: p.cutoff})
		if err != nil {
			return nil, nil, false, err
		}
		done := r.st == stContinue
		if done && n.Join.Kind == graph.JoinFirst {
			done = bc.evalGuard(e.ix, n.Join.When)
		}
		probes[i] = parBranch{i, r, bc, done, e.dirt != dirt}
		if done {
			completed = append(completed, probes[i])
		}
		if r.st == stPending {
			anyPending = true
		}
	}
	return probes, completed, anyPending, nil
}

// parShort handles a par with fewer completed branches than its join needs:
// pending while some branch is (deciding every branch in decide mode), else
// unreachable, where only the par's own control and the branches' visit
// counters reach the parent.
func (e *evaluator) parShort(n *graph.Par, c, in *ctx, p pass, probes []parBranch, anyPending bool, j parJoin) (res, error) {
	if anyPending {
		if p.decide {
			e.second++
			defer func() { e.second-- }()
			for _, b := range n.Branches {
				if _, err := e.eval(b, branchCtx(in), p); err != nil {
					return res{}, err
				}
			}
		}
		return pending, nil
	}
	var pos uint64
	for _, b := range probes {
		pos = max(pos, b.r.pos)
		c.mergeVisits(b.ctx)
	}
	c.setControl(n.Name, graph.ControlGroup, strp(j.field), c.scope, j.unreachable)
	e.emitContinue(p, n.Name)
	return res{st: stContinue, pos: pos}, nil
}

// joinWinners re-evaluates each winner at the join position (wp) and copies
// out what it really wrote under the promoted paths, then its facts.
func (e *evaluator) joinWinners(n *graph.Par, c, in *ctx, winners []parBranch, wp pass) error {
	for _, w := range winners {
		wc := branchCtx(in)
		r, err := e.eval(n.Branches[w.idx], wc, wp)
		if err != nil {
			return err
		}
		if r.st != stContinue {
			return errf(ErrInconsistentHistory, "par %q: winner %q does not complete at the join position", n.Name, n.Branches[w.idx].NodeName())
		}
		for _, P := range writtenUnder(n.PromotedStatePaths, wc.written) {
			v, err := selectPath(wc.state, P)
			if err != nil {
				return err
			}
			if c.state, err = setPath(c.state, P, v); err != nil {
				return err
			}
			c.written = addWritten(c.written, P)
		}
		c.mergeFacts(wc, in)
	}
	return nil
}

// emitParPromote emits the par's promote decision: every promoted path's
// value in the parent after the join.
func (e *evaluator) emitParPromote(n *graph.Par, c *ctx, p pass) error {
	var vals []Promoted
	for _, P := range n.PromotedStatePaths {
		v, err := selectPath(c.state, P)
		if err != nil {
			return err
		}
		if vals, err = e.appendPromoted(vals, p, P, v); err != nil {
			return err
		}
	}
	e.emitPromote(n.Name, c.scope, vals)
	return nil
}
