package cluster

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Messages of apply's mode and input rules.
const (
	msgDryRunKey       = "dry-run apply must omit idempotencyKey"
	msgDryRunInput     = "dry-run apply must omit input"
	msgCommitNeedsKey  = "committed apply requires idempotencyKey"
	msgUnchangedInput  = "unchanged apply must omit input; use resubmit to supply a new root input"
	msgChangedNeedsIn  = "apply that starts a run requires input"
	msgInvalidCompiled = "Graph verifier returned invalid compiled IR"
)

// applyFingerprint re-serializes typed apply params: the graph in its
// canonical form, input only when present (null counts), dryRun always
// (omitted == false), ifGeneration only when present.
func applyFingerprint(spec []byte, p protocol.ApplyParams) (string, error) {
	m := map[string]any{"graph": json.RawMessage(spec), "dryRun": p.DryRun}
	if p.HasInput {
		m["input"] = json.RawMessage(valueBytes(p.Input))
	}
	if p.IfGeneration != nil {
		m["ifGeneration"] = *p.IfGeneration
	}
	return fingerprint(protocol.MethodApply, m)
}

// valueBytes is v, or null when v is absent.
func valueBytes(v protocol.Value) []byte {
	if len(v) == 0 {
		return []byte("null")
	}
	return v
}

// Apply admits a graph. The order of checks is the protocol's for apply:
// decode, mode rules, replay, verify, generation CAS, diff, dry run, input
// rules, cancellation, phase, then the commit. A committed apply runs
// replay, CAS, diff, input rules, cancellation and phase again inside the
// one store transaction that writes, so a racing writer is decided there.
func (b *Backend) Apply(ctx context.Context, p protocol.ApplyParams) (*protocol.ApplyResult, error) {
	// 1. decode
	g, err := graph.Decode(p.Graph)
	if err != nil {
		return nil, protocol.SchemaError()
	}
	// 2. mode rules
	if err := applyModeRules(p); err != nil {
		return nil, err
	}
	tenant := b.tenant(ctx)
	spec, err := g.MarshalJSON()
	if err != nil {
		return nil, b.wire(err)
	}
	var fp string
	if !p.DryRun {
		if fp, err = applyFingerprint(spec, p); err != nil {
			return nil, b.wire(err)
		}
		// 3. idempotency replay
		var res *protocol.ApplyResult
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			var err error
			res, err = replayApply(tx, tenant, *p.IdempotencyKey, fp)
			return err
		})
		if err != nil || res != nil {
			return res, b.wire(err)
		}
	}
	// 4. verify
	v, err := b.verify(ctx, g)
	if err != nil {
		return nil, err
	}
	if !v.OK {
		return nil, protocol.AppError(protocol.GraphInvalid, protocol.MsgGraphInvalid, map[string]any{"diagnostics": v.Diagnostics})
	}
	ident, err := graph.IdentityIR(&graph.IR{Spec: g, Bounds: *v.Bounds})
	if err != nil {
		return nil, b.wire(err)
	}
	a := admission{p: p, g: g, spec: spec, ident: ident, fp: fp}
	var res *protocol.ApplyResult
	if p.DryRun {
		err = b.store.View(ctx, func(tx store.ReadTx) error {
			res, err = a.dryRun(tx, tenant)
			return err
		})
	} else {
		err = b.store.Update(ctx, func(tx store.Tx) error {
			res, err = b.commitApply(ctx, tx, tenant, a)
			return err
		})
	}
	if err != nil {
		return nil, b.wire(err)
	}
	traceApplied(ctx, tenant, p, res)
	return res, nil
}

// applyModeRules: a dry run carries neither idempotencyKey nor input, a
// committed apply carries an idempotencyKey.
func applyModeRules(p protocol.ApplyParams) error {
	switch {
	case p.DryRun && p.IdempotencyKey != nil:
		return protocol.SchemaReason(msgDryRunKey)
	case p.DryRun && p.HasInput:
		return protocol.SchemaReason(msgDryRunInput)
	case !p.DryRun && p.IdempotencyKey == nil:
		return protocol.SchemaReason(msgCommitNeedsKey)
	}
	return nil
}

// replayApply is the stored receipt of key marked deduped, or nil when the
// key is unused.
func replayApply(tx store.ReadTx, tenant, key, fp string) (*protocol.ApplyResult, error) {
	hit, err := replay(tx, tenant, key, fp)
	if err != nil || hit == nil {
		return nil, err
	}
	return dedupe(hit, func(r *protocol.ApplyResult) { r.Deduped = true })
}

// admission is one verified apply: its params, the decoded graph in
// canonical form, its compiled-IR identity and its fingerprint.
type admission struct {
	p     protocol.ApplyParams
	g     *graph.GraphSpec
	spec  []byte
	ident string
	fp    string
}

// checkState runs the generation CAS (5; omitted ifGeneration upserts) and
// the diff (6; it fails only on a compiled IR with duplicate names)
// against the committed state.
func (a admission) checkState(st *state) (*protocol.GraphDiff, error) {
	if a.p.IfGeneration != nil {
		if err := checkGeneration(st, *a.p.IfGeneration); err != nil {
			return nil, err
		}
	}
	return diffAgainst(st, a.g)
}

// dryRun answers a dry run (7) from one snapshot.
func (a admission) dryRun(tx store.ReadTx, tenant string) (*protocol.ApplyResult, error) {
	st, _, err := load(tx, tenant)
	if err != nil {
		return nil, err
	}
	d, err := a.checkState(st)
	if err != nil {
		return nil, err
	}
	return &protocol.ApplyResult{Generation: st.generation(), RunID: st.runID(), Phase: st.Phase, Diff: d}, nil
}

// inputRules (8): an unchanged apply omits input; a changed one carries
// an input valid for the graph's initialInput.
func (a admission) inputRules(changed bool) error {
	switch {
	case !changed && a.p.HasInput:
		return protocol.SchemaReason(msgUnchangedInput)
	case changed && !a.p.HasInput:
		return protocol.SchemaReason(msgChangedNeedsIn)
	case changed:
		if err := a.g.InitialInput.Validate(json.RawMessage(valueBytes(a.p.Input))); err != nil {
			return protocol.SchemaReason(err.Error())
		}
	}
	return nil
}

// commitApply is the committed apply inside its store transaction: replay
// again (a racing winner keeps precedence), CAS and diff, input rules,
// cancellation immediately before any effect, phase, then the write and
// the receipt.
func (b *Backend) commitApply(ctx context.Context, tx store.Tx, tenant string, a admission) (*protocol.ApplyResult, error) {
	key := *a.p.IdempotencyKey
	if res, err := replayApply(tx, tenant, key, a.fp); err != nil || res != nil {
		return res, err
	}
	st, version, err := load(tx, tenant)
	if err != nil {
		return nil, err
	}
	if _, err := a.checkState(st); err != nil {
		return nil, err
	}
	changed := st.Identity != a.ident
	if err := a.inputRules(changed); err != nil {
		return nil, err
	}
	// 9. cancellation
	if ctx.Err() != nil {
		return nil, errCancelled()
	}
	// 10. phase
	if err := b.admitPhase(tx, tenant, st, changed); err != nil {
		return nil, err
	}
	if changed {
		if err := b.startRun(tx, tenant, st, a.spec, a.ident, st.Generation+1, valueBytes(a.p.Input)); err != nil {
			return nil, err
		}
		if err := save(tx, tenant, st, version); err != nil {
			return nil, err
		}
	}
	res := &protocol.ApplyResult{Generation: st.generation(), RunID: st.runID(), Phase: st.Phase}
	return res, record(tx, tenant, key, a.fp, res)
}

// admitPhase is apply's phase rule: an empty cluster admits; a running
// one admits while its dispatch gate is active, and a changed graph only
// with nothing in flight. With an engine, a changed graph supersedes the
// running run only while the run holds (nothing in flight, nothing
// pending), and the run ends first (finished, stop mode force).
func (b *Backend) admitPhase(tx store.Tx, tenant string, st *state, changed bool) error {
	switch st.Phase {
	case protocol.PhaseEmpty:
		return nil
	case protocol.PhaseRunning:
		if st.Op.Gate != protocol.DispatchActive || (changed && st.inFlight() > 0) {
			return protocol.PhaseError(st.Phase)
		}
		if !changed || !b.cfg.Engine {
			return nil
		}
		if st.Held == 0 {
			return protocol.PhaseError(st.Phase)
		}
		st.Op.StopMode = "force"
		return finish(tx, tenant, st)
	}
	return protocol.PhaseError(st.Phase)
}

// startRun mints a run and appends its admission record: the shared commit
// of a changed apply and of resubmit. The lifecycle is reset to the
// fresh-run defaults; the previous run (if any) is superseded as is.
func (b *Backend) startRun(tx store.Tx, tenant string, st *state, spec []byte, ident string, gen int64, seed []byte) error {
	n, err := tx.NextCounter(counterRun)
	if err != nil {
		return err
	}
	runID := runString(n)
	if err := tx.CreateRun(tenant, store.Run{ID: runID, Seed: seed}); err != nil {
		return err
	}
	if st.RunID != "" {
		if err := markEnded(tx, tenant, st.RunID); err != nil {
			return err
		}
	}
	runs := append(st.Runs, runID)
	retrySeq, held := st.RetrySeq, st.CleanupHeld
	*st = state{
		Phase:       protocol.PhaseRunning,
		Generation:  gen,
		Spec:        spec,
		Identity:    ident,
		RunID:       runID,
		Op:          freshOperational(),
		History:     reasonExhausted,
		RetrySeq:    retrySeq,
		CleanupHeld: held,
		Runs:        runs,
	}
	if err := setRunning(tx, tenant, runID); err != nil {
		return err
	}
	return appendRecord(tx, tenant, st, func(st *state) protocol.WatchEvent {
		ev := phaseEvent(st)
		ev.Admission = &protocol.Admission{RunID: runID, Spec: spec, SeedInput: protocol.Value(seed)}
		return ev
	})
}

// diffAgainst diffs g against the committed graph (every node added when
// the cluster is empty).
func diffAgainst(st *state, g *graph.GraphSpec) (*protocol.GraphDiff, error) {
	var old *graph.GraphSpec
	if len(st.Spec) > 0 {
		var err error
		if old, err = graph.Decode(st.Spec); err != nil {
			return nil, err
		}
	}
	d, err := graph.Diff(old, g)
	if err != nil {
		var dup *graph.DuplicateNodeError
		if errors.As(err, &dup) {
			return nil, protocol.AppError(protocol.GraphInvalid, msgInvalidCompiled, map[string]any{"reason": dup.Error()})
		}
		return nil, err
	}
	return &protocol.GraphDiff{Added: d.Added, Removed: d.Removed, Changed: d.Changed}, nil
}

// dedupe decodes a stored receipt and marks it as a replay.
func dedupe[T any](data []byte, mark func(*T)) (*T, error) {
	r := new(T)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, err
	}
	mark(r)
	return r, nil
}
