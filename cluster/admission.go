package cluster

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// Messages of apply's mode and input rules (spec/01 §4.4).
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

// Apply admits a graph. The order of checks is spec/01 §4.4 exactly:
// decode, mode rules, replay, verify, generation CAS, diff, dry run, input
// rules, cancellation, then the atomic commit, which re-checks replay, CAS
// and phase inside the store transaction.
func (b *Backend) Apply(ctx context.Context, p protocol.ApplyParams) (*protocol.ApplyResult, error) {
	// 1. decode
	g, err := graph.Decode(p.Graph)
	if err != nil {
		return nil, protocol.SchemaError()
	}
	// 2. mode rules
	switch {
	case p.DryRun && p.IdempotencyKey != nil:
		return nil, protocol.SchemaReason(msgDryRunKey)
	case p.DryRun && p.HasInput:
		return nil, protocol.SchemaReason(msgDryRunInput)
	case !p.DryRun && p.IdempotencyKey == nil:
		return nil, protocol.SchemaReason(msgCommitNeedsKey)
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
		var hit []byte
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			var err error
			hit, err = replay(tx, tenant, *p.IdempotencyKey, fp)
			return err
		})
		if err != nil {
			return nil, b.wire(err)
		}
		if hit != nil {
			return dedupe[protocol.ApplyResult](hit, func(r *protocol.ApplyResult) { r.Deduped = true })
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

	if p.DryRun {
		var res *protocol.ApplyResult
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			st, _, err := load(tx, tenant)
			if err != nil {
				return err
			}
			// 5. generation precheck
			if p.IfGeneration != nil {
				if err := checkGeneration(st, *p.IfGeneration); err != nil {
					return err
				}
			}
			// 6. diff, 7. dry-run answer
			d, err := diffAgainst(st, g)
			if err != nil {
				return err
			}
			res = &protocol.ApplyResult{Generation: st.generation(), RunID: st.runID(), Phase: st.Phase, Diff: d}
			return nil
		})
		return res, b.wire(err)
	}

	var res *protocol.ApplyResult
	err = b.store.Update(ctx, func(tx store.Tx) error {
		res = nil
		// Replay again inside the commit: a racing winner keeps precedence.
		hit, err := replay(tx, tenant, *p.IdempotencyKey, fp)
		if err != nil {
			return err
		}
		if hit != nil {
			res, err = dedupe[protocol.ApplyResult](hit, func(r *protocol.ApplyResult) { r.Deduped = true })
			return err
		}
		st, version, err := load(tx, tenant)
		if err != nil {
			return err
		}
		// 5. generation CAS (omitted: upsert)
		if p.IfGeneration != nil {
			if err := checkGeneration(st, *p.IfGeneration); err != nil {
				return err
			}
		}
		// 6. diff (fails only on a compiled IR with duplicate names)
		if _, err := diffAgainst(st, g); err != nil {
			return err
		}
		changed := st.Identity != ident
		// 8. input rules
		switch {
		case !changed && p.HasInput:
			return protocol.SchemaReason(msgUnchangedInput)
		case changed && !p.HasInput:
			return protocol.SchemaReason(msgChangedNeedsIn)
		case changed:
			if err := g.InitialInput.Validate(json.RawMessage(valueBytes(p.Input))); err != nil {
				return protocol.SchemaReason(err.Error())
			}
		}
		// 9. cancellation, immediately before any effect
		if ctx.Err() != nil {
			return errCancelled()
		}
		// 10. phase
		switch st.Phase {
		case protocol.PhaseEmpty:
		case protocol.PhaseRunning:
			if st.Op.Gate != protocol.DispatchActive || (changed && st.inFlight() > 0) {
				return protocol.PhaseError(st.Phase)
			}
			if changed && b.cfg.Engine {
				// An engine-driven run is superseded only while it holds
				// (nothing in flight, nothing pending); it ends first.
				if st.Held == 0 {
					return protocol.PhaseError(st.Phase)
				}
				st.Op.StopMode = "force"
				if err := finish(tx, tenant, st); err != nil {
					return err
				}
			}
		default:
			return protocol.PhaseError(st.Phase)
		}
		if !changed {
			res = &protocol.ApplyResult{Generation: st.generation(), RunID: st.runID(), Phase: st.Phase}
			return record(tx, tenant, *p.IdempotencyKey, fp, res)
		}
		gen := st.Generation + 1
		if err := b.startRun(tx, tenant, st, spec, ident, gen, valueBytes(p.Input)); err != nil {
			return err
		}
		if err := save(tx, tenant, st, version); err != nil {
			return err
		}
		res = &protocol.ApplyResult{Generation: st.generation(), RunID: st.runID(), Phase: st.Phase}
		return record(tx, tenant, *p.IdempotencyKey, fp, res)
	})
	if err != nil {
		return nil, b.wire(err)
	}
	return res, nil
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
