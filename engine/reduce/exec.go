package reduce

import (
	"encoding/json"
	"slices"

	"github.com/oecp/oecp/graph"
)

type execNode struct {
	name      string
	kind      graph.NodeKind
	worker    string
	timeoutMs uint64
	attempts  uint64
	inputs    []graph.InputBinding
	writes    []graph.WriteBinding
	signals   map[string][]string
}

// evalExec visits a step or verifier: the k-th visit of an occurrence in
// this evaluation matches its k-th recorded visit, whose attempts are a
// budget of their own.
func (e *evaluator) evalExec(n execNode, c *ctx, p pass) (res, error) {
	occ := occKey(n.name, c.scope)
	in, err := c.canonicalInput(n.inputs)
	if err != nil {
		return res{}, err
	}
	k := c.visits[occ] + 1
	visits := e.h.byOcc[occ]
	if k > len(visits) {
		if p.dispatches() {
			if err := e.dispatch(n, c.scope, occ, 1, in); err != nil {
				return res{}, err
			}
		}
		return pending, nil
	}
	v := visits[k-1]
	c.visits[occ] = k
	for _, x := range v.entries {
		e.consume(x)
		if x.input != string(in) {
			return res{}, errf(ErrInconsistentHistory, "execution %d of %q: recorded input %s differs from %s", x.Execution.Execution, n.name, x.input, in)
		}
	}
	budget := e.budget(n, v)
	for i, x := range v.entries {
		if x.Attempt > budget {
			return res{}, errf(ErrInconsistentHistory, "execution %d of %q: attempt %d beyond its budget %d", x.Execution.Execution, n.name, x.Attempt, budget)
		}
		if x.DispatchPosition > p.cutoff || x.State != StateSettled || x.Position > p.cutoff {
			return pending, nil
		}
		o := x.Outcome
		switch {
		case o.Status == OutcomeError:
		case o.Status == OutcomeVerified && n.kind == graph.KindStep, o.Status == OutcomeVerifier && n.kind == graph.KindVerifier:
			if err := e.applySuccess(n, c, o, p); err != nil {
				return res{}, err
			}
			return res{st: stContinue, pos: x.Position}, nil
		default:
			return res{}, errf(ErrInconsistentHistory, "execution %d: %s outcome for %s %q", x.Execution.Execution, o.Status, n.kind, n.name)
		}
		if i < len(v.entries)-1 {
			continue // a later attempt exists (indexHistory checked the chain)
		}
		if x.Attempt < budget {
			if p.dispatches() {
				if err := e.dispatch(n, c.scope, occ, x.Attempt+1, in); err != nil {
					return res{}, err
				}
			}
			return pending, nil
		}
		if e.native || e.ix.errorRouted[n.name] {
			e.applyError(n, c, o.Code)
			e.emitContinue(p, n.name)
			return res{st: stContinue, pos: x.Position}, nil
		}
		if p.dispatches() {
			e.emit(Decision{Kind: DecisionHold, Hold: &Hold{
				Execution: x.Execution.Execution, NodeInstance: x.NodeInstance,
				Occurrence: x.Occurrence, Attempt: x.Attempt, Code: o.Code,
			}})
		}
		return pending, nil
	}
	return pending, nil // unreachable: a visit has at least one entry
}

func (e *evaluator) dispatch(n execNode, scope []uint64, occ string, attempt uint64, in json.RawMessage) error {
	ni, ok := e.h.niOcc[occ]
	if !ok {
		if e.h.nextNI > MaxIdentity {
			return errf(ErrIdentityOutOfRange, "node instance ids exhausted")
		}
		ni = e.h.nextNI
		e.h.nextNI++
		e.h.niOcc[occ] = ni
	}
	if e.h.nextEx > MaxIdentity {
		return errf(ErrIdentityOutOfRange, "execution ids exhausted")
	}
	ex := e.h.nextEx
	e.h.nextEx++
	e.emit(Decision{Kind: DecisionDispatch, Dispatch: &Dispatch{
		NodeInstance: ni, Execution: ex,
		Occurrence: Occurrence{Node: n.name, MapIndices: slices.Clone(scope)},
		Attempt:    attempt, Kind: n.kind, Worker: n.worker, Input: in, TimeoutMs: n.timeoutMs,
	}})
	return nil
}

// clearControls clears n's signal and error controls at the current scope:
// an executable's latest outcome replaces its earlier ones, so one node
// never holds both an error and a signal.
func (e *evaluator) clearControls(n execNode, c *ctx) {
	for f := range n.signals {
		k := ctrlKey{node: n.name, source: graph.ControlSignal, field: f, hasField: true, idx: idxKey(c.scope)}
		if _, ok := c.controls[k]; ok {
			c.controls[k] = ctrlVal{indices: c.scope}
		}
	}
	k := ctrlKey{node: n.name, source: graph.ControlError, idx: idxKey(c.scope)}
	if _, ok := c.controls[k]; ok {
		c.controls[k] = ctrlVal{indices: c.scope}
	}
}

func (e *evaluator) applyError(n execNode, c *ctx, code string) {
	e.clearControls(n, c)
	c.setControl(n.name, graph.ControlError, nil, c.scope, code)
}

// applySuccess records a successful outcome: signal controls, the
// channel, then the write bindings in authored order.
func (e *evaluator) applySuccess(n execNode, c *ctx, o *Outcome, p pass) error {
	e.clearControls(n, c)
	out, err := e.memo.value(o.Output)
	if err != nil {
		return err
	}
	ch := &channel{out: out, signals: map[string]string{}}
	if n.kind == graph.KindVerifier {
		if ch.diag, err = e.memo.value(o.Diagnostic); err != nil {
			return err
		}
		fields := make([]string, 0, len(o.Signals))
		for f := range o.Signals {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		for _, f := range fields {
			ch.signals[f] = o.Signals[f]
			c.setControl(n.name, graph.ControlSignal, strp(f), c.scope, o.Signals[f])
		}
	}
	c.channels[chanKey{n.name, idxKey(c.scope)}] = ch
	var vals []Promoted
	for _, wb := range n.writes {
		v, err := e.readChannel(c, wb.Value)
		if err != nil {
			return err
		}
		if c.state, err = setPath(c.state, wb.Target, v); err != nil {
			return err
		}
		c.written = addWritten(c.written, wb.Target)
		if vals, err = e.appendPromoted(vals, p, wb.Target, v); err != nil {
			return err
		}
	}
	if p.decide {
		e.emitPromote(n.name, c.scope, vals)
		e.emitContinue(p, n.name)
	}
	return nil
}

// readChannel resolves a write binding's value. The source's channel is
// looked up at the source's own map depth (a prefix of the writer's scope),
// so a writer inside a map may read a node outside it.
func (e *evaluator) readChannel(c *ctx, sel graph.NodeOutputSelector) (any, error) {
	d := e.ix.depth[sel.Node]
	if d > len(c.scope) {
		return nil, errf(ErrMissingSelectedValue, "channel of %q is inside a map the writer is outside of", sel.Node)
	}
	ch, ok := c.channels[chanKey{sel.Node, idxKey(c.scope[:d])}]
	if !ok {
		return nil, errf(ErrMissingSelectedValue, "%q has no successful outcome in this scope", sel.Node)
	}
	switch sel.Channel {
	case graph.ChannelOut:
		return selectPath(ch.out, sel.Path)
	case graph.ChannelDiagnostic:
		return selectPath(ch.diag, sel.Path)
	case graph.ChannelSignal:
		if len(sel.Path) == 0 {
			return nil, errf(ErrMissingSelectedValue, "signal read of %q without a field", sel.Node)
		}
		l, ok := ch.signals[sel.Path[0]]
		if !ok {
			return nil, errf(ErrMissingSelectedValue, "%q has no signal %q", sel.Node, sel.Path[0])
		}
		return l, nil
	}
	return nil, errf(ErrInvalidGraph, "unknown channel %q", sel.Channel)
}
