package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// mutation is what the five lifecycle mutations share: the method and the
// params its idempotency fingerprint is taken over (absence and presence
// already decided), the idempotency key, and the generation CAS.
type mutation struct {
	method       string
	params       map[string]any
	key          string
	ifGeneration int64
}

// mutate runs one lifecycle mutation in one transaction: replay, the
// generation CAS, then fn on the loaded state, then (if fn did not fail)
// the state and the receipt are written. fn returns the fresh result; a
// replay returns the stored one marked deduped.
func mutate[T any](ctx context.Context, b *Backend, m mutation, mark func(*T), fn func(tx store.Tx, tenant string, st *state) (*T, error)) (*T, error) {
	fp, err := fingerprint(m.method, m.params)
	if err != nil {
		return nil, b.wire(err)
	}
	tenant := b.tenant(ctx)
	var res *T
	err = b.store.Update(ctx, func(tx store.Tx) error {
		res = nil
		hit, err := replay(tx, tenant, m.key, fp)
		if err != nil {
			return err
		}
		if hit != nil {
			res, err = dedupe(hit, mark)
			return err
		}
		st, version, err := load(tx, tenant)
		if err != nil {
			return err
		}
		if err := checkGeneration(st, m.ifGeneration); err != nil {
			return err
		}
		r, err := fn(tx, tenant, st)
		if err != nil {
			return err
		}
		if err := save(tx, tenant, st, version); err != nil {
			return err
		}
		res = r
		return record(tx, tenant, m.key, fp, r)
	})
	if err != nil {
		return nil, b.wire(err)
	}
	return res, nil
}

// Update changes labels, log level or the dispatch gate of the running
// run. Order: replay, generation CAS, phase (running, dispatch active or
// suspended), then one phase record.
func (b *Backend) Update(ctx context.Context, p protocol.UpdateParams) (*protocol.UpdateResult, error) {
	m := map[string]any{"ifGeneration": p.IfGeneration}
	if p.HasLabels {
		m["labels"] = p.Labels
	}
	if p.LogLevel != nil {
		m["logLevel"] = *p.LogLevel
	}
	if p.Suspended != nil {
		m["suspended"] = *p.Suspended
	}
	return mutate(ctx, b, mutation{protocol.MethodUpdate, m, p.IdempotencyKey, p.IfGeneration}, func(r *protocol.UpdateResult) { r.Deduped = true },
		func(tx store.Tx, tenant string, st *state) (*protocol.UpdateResult, error) {
			// An empty cluster is INVALID_PHASE {currentPhase: empty}
			// (the reference answers an internal error there).
			if st.Phase != protocol.PhaseRunning || (st.Op.Gate != protocol.DispatchActive && st.Op.Gate != protocol.DispatchSuspended) {
				return nil, protocol.PhaseError(st.Phase)
			}
			if p.HasLabels {
				st.Op.Labels = maps.Clone(p.Labels)
			}
			if p.LogLevel != nil {
				st.Op.LogLevel = *p.LogLevel
			}
			if p.Suspended != nil {
				st.Op.Gate = protocol.DispatchActive
				if *p.Suspended {
					st.Op.Gate = protocol.DispatchSuspended
				}
			}
			if err := appendRecord(tx, tenant, st, phaseEvent); err != nil {
				return nil, err
			}
			return &protocol.UpdateResult{
				Generation: st.Generation, RunID: st.RunID, Phase: st.Phase,
				Operational: st.operational(), AtCursor: cursorString(st.Cursor),
			}, nil
		})
}

// Stop stops the running run. Order: replay, generation CAS, phase
// running (and not already force-stopping), then a stop-requested phase
// record and the settlement: drain with nothing in flight and force
// finish at once (force first cuts off every execution in flight, one
// bookmark each); drain with executions in flight finishes when the last
// of them ends.
func (b *Backend) Stop(ctx context.Context, p protocol.StopParams) (*protocol.StopResult, error) {
	m := map[string]any{"mode": p.Mode, "ifGeneration": p.IfGeneration}
	return mutate(ctx, b, mutation{protocol.MethodStop, m, p.IdempotencyKey, p.IfGeneration}, func(r *protocol.StopResult) { r.Deduped = true },
		func(tx store.Tx, tenant string, st *state) (*protocol.StopResult, error) {
			if st.Phase != protocol.PhaseRunning || st.Op.Gate == protocol.DispatchForceStopping || st.Op.Gate == protocol.DispatchStopped {
				return nil, protocol.PhaseError(st.Phase)
			}
			effective := p.Mode
			if st.Op.StopMode == "force" {
				effective = "force" // drain never weakens force
			}
			st.Op.StopMode = effective
			st.Op.Gate = protocol.DispatchDraining
			if effective == "force" {
				st.Op.Gate = protocol.DispatchForceStopping
			}
			if err := appendRecord(tx, tenant, st, phaseEvent); err != nil {
				return nil, err
			}
			if effective == "force" {
				for range st.inFlight() {
					if err := appendRecord(tx, tenant, st, bookmarkEvent); err != nil {
						return nil, err
					}
				}
			}
			if effective == "force" || st.inFlight() == 0 {
				if err := finish(tx, tenant, st); err != nil {
					return nil, err
				}
			}
			return &protocol.StopResult{
				Generation: st.Generation, RunID: st.RunID, Phase: st.Phase,
				AcceptedMode: p.Mode, EffectiveMode: effective,
				Operational: st.operational(), AtCursor: cursorString(st.Cursor),
			}, nil
		})
}

// finish appends the run's single finished record.
func finish(tx store.Tx, tenant string, st *state) error {
	st.Phase = protocol.PhaseFinished
	st.Op.Gate = protocol.DispatchStopped
	st.Frontier = ""
	st.PendingRetry = ""
	st.Held = 0
	if err := setRunning(tx, tenant, ""); err != nil {
		return err
	}
	return appendRecord(tx, tenant, st, func(st *state) protocol.WatchEvent {
		s := st.status()
		return protocol.WatchEvent{Type: protocol.EventFinished, FinalStatus: &s, StopMode: st.Op.StopMode}
	})
}

// Retry reserves a retry turn for the latest retryable failed frontier.
// Order: replay, generation CAS, phase (finished is rejected), dispatch
// state (must be active; empty and deleting count as stopped), leases
// (active), a reserved retry (consumed), no frontier (history reason).
func (b *Backend) Retry(ctx context.Context, p protocol.RetryParams) (*protocol.RetryResult, error) {
	m := map[string]any{"ifGeneration": p.IfGeneration}
	return mutate(ctx, b, mutation{protocol.MethodRetry, m, p.IdempotencyKey, p.IfGeneration}, func(r *protocol.RetryResult) { r.Deduped = true },
		func(tx store.Tx, tenant string, st *state) (*protocol.RetryResult, error) {
			if st.Phase == protocol.PhaseFinished {
				return nil, protocol.PhaseError(st.Phase)
			}
			if gs := st.gateState(); gs != protocol.DispatchActive {
				return nil, errGate(gs)
			}
			switch {
			case st.inFlight() > 0:
				return nil, errNoFrontier(reasonActive)
			case st.PendingRetry != "":
				return nil, errNoFrontier(reasonConsumed)
			case st.Frontier == "":
				reason := st.History
				if reason == "" {
					reason = reasonExhausted
				}
				return nil, errNoFrontier(reason)
			}
			retried := st.Frontier
			st.RetrySeq++
			turn := "retry-" + strconv.FormatUint(st.RetrySeq, 10)
			if st.Held != 0 {
				// An engine-held run: grant the held visit one more attempt.
				st.Grants = append(st.Grants, st.Held)
				st.Held = 0
			}
			st.Frontier = ""
			st.History = reasonConsumed
			st.PendingRetry = turn
			if err := appendRecord(tx, tenant, st, bookmarkEvent); err != nil {
				return nil, err
			}
			return &protocol.RetryResult{
				Generation: st.Generation, RunID: st.RunID, Phase: st.Phase,
				RetriedTurnID: retried, RetryTurnID: turn,
				Operational: st.operational(), AtCursor: cursorString(st.Cursor),
			}, nil
		})
}

// Resubmit starts a new run of the finished graph at the same generation.
// Order: cancellation, replay, generation CAS, run CAS, phase finished,
// input (replacementInput validated against initialInput, else the prior
// run's seed), cancellation, commit.
func (b *Backend) Resubmit(ctx context.Context, p protocol.ResubmitParams) (*protocol.ResubmitResult, error) {
	if ctx.Err() != nil {
		return nil, errCancelled()
	}
	m := map[string]any{"ifGeneration": p.IfGeneration, "ifRunId": p.IfRunID}
	if p.HasReplacement {
		m["replacementInput"] = json.RawMessage(valueBytes(p.ReplacementInput))
	}
	return mutate(ctx, b, mutation{protocol.MethodResubmit, m, p.IdempotencyKey, p.IfGeneration}, func(r *protocol.ResubmitResult) { r.Deduped = true },
		func(tx store.Tx, tenant string, st *state) (*protocol.ResubmitResult, error) {
			if err := checkRun(st, &p.IfRunID); err != nil {
				return nil, err
			}
			if st.Phase != protocol.PhaseFinished {
				return nil, protocol.PhaseError(st.Phase)
			}
			var seed []byte
			if p.HasReplacement {
				g, err := graph.Decode(st.Spec)
				if err != nil {
					return nil, err
				}
				seed = valueBytes(p.ReplacementInput)
				if err := g.InitialInput.Validate(seed); err != nil {
					return nil, protocol.SchemaReason(err.Error())
				}
			} else {
				prior, ok, err := tx.Run(tenant, st.RunID)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, errRun(st)
				}
				seed = prior.Seed
			}
			if ctx.Err() != nil {
				return nil, errCancelled()
			}
			prior := st.RunID
			if err := b.startRun(tx, tenant, st, st.Spec, st.Identity, st.Generation, seed); err != nil {
				return nil, err
			}
			return &protocol.ResubmitResult{
				Generation: st.Generation, PriorRunID: prior, RunID: st.RunID, Phase: st.Phase,
				Operational: st.operational(), AtCursor: cursorString(st.Cursor),
			}, nil
		})
}

// Delete empties a finished cluster (tombstoning its runs' history) or
// holds it in deleting until cleanup is confirmed; on an empty cluster it
// is a no-op receipt. Order: cancellation, replay, generation CAS, run
// CAS, phase (empty or finished), cancellation, outcome. It appends no
// event.
func (b *Backend) Delete(ctx context.Context, p protocol.DeleteParams) (*protocol.DeleteResult, error) {
	if ctx.Err() != nil {
		return nil, errCancelled()
	}
	m := map[string]any{"ifGeneration": p.IfGeneration, "ifRunId": nil}
	if p.IfRunID != nil {
		m["ifRunId"] = *p.IfRunID
	}
	return mutate(ctx, b, mutation{protocol.MethodDelete, m, p.IdempotencyKey, p.IfGeneration}, func(r *protocol.DeleteResult) { r.Deduped = true },
		func(tx store.Tx, tenant string, st *state) (*protocol.DeleteResult, error) {
			if err := checkRun(st, p.IfRunID); err != nil {
				return nil, err
			}
			if st.Phase != protocol.PhaseEmpty && st.Phase != protocol.PhaseFinished {
				return nil, protocol.PhaseError(st.Phase)
			}
			if ctx.Err() != nil {
				return nil, errCancelled()
			}
			if st.Phase == protocol.PhaseEmpty {
				return &protocol.DeleteResult{Phase: protocol.PhaseEmpty}, nil
			}
			if st.CleanupHeld {
				st.Phase = protocol.PhaseDeleting
				return &protocol.DeleteResult{Phase: st.Phase, Generation: st.generation(), RunID: st.runID(), AtCursor: st.cursor()}, nil
			}
			if err := finalizeDelete(tx, tenant, st); err != nil {
				return nil, err
			}
			return &protocol.DeleteResult{Deleted: true, Phase: protocol.PhaseEmpty}, nil
		})
}

// finalizeDelete tombstones every run of the cluster and resets it to
// empty (the next apply starts at generation 1). Idempotency receipts are
// kept.
func finalizeDelete(tx store.Tx, tenant string, st *state) error {
	for _, r := range st.Runs {
		if err := errors.Join(tx.TombstoneRun(tenant, r), markEnded(tx, tenant, r)); err != nil {
			return err
		}
	}
	retrySeq := st.RetrySeq
	*st = *emptyState()
	st.RetrySeq = retrySeq
	return nil
}
