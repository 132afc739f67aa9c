package runs

import (
	"context"
	"errors"
	"io"
	"math"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/runs/export"
	"github.com/oecp/oecp/store"
)

// Exports. A run's export is read in pages up to a snapshot taken when it
// starts (the run's cursor and its last evidence record, once the evidence
// this server still holds in memory for the run is written), so it never
// holds the whole run in memory and the same finished run always gives
// the same bytes; a run still going is exported as far as it got, with a
// footer that says so.

// exportPage bounds the records one read of an export takes.
const exportPage = 256

// errExportGone: the run's history was deleted by retention.
var errExportGone = errors.New("runs: run history was deleted")

// ErrBadFormat is returned for an unknown export format.
var ErrBadFormat = errors.New("runs: export format must be trace or semantic")

// exportPlan is what an export reads: up to which cursor and evidence
// record, whether the run has finished, and its agent executions.
type exportPlan struct {
	tk, runID string
	cursor    uint64
	evidence  uint64
	finished  bool
	agents    []string
}

// Export writes the export of run runID (of the caller's tenant) in
// format to w. Before anything is written it answers, as protocol errors,
// NOT_FOUND for a run the tenant does not have, GONE for one retention
// deleted, and INVALID_PARAMS (ErrBadFormat) for an unknown format.
func (b *Backend) Export(ctx context.Context, runID, format string, w io.Writer) error {
	if !export.Valid(format) {
		return protocol.SchemaReason(ErrBadFormat.Error())
	}
	tk := b.tenant(ctx)
	// What this server's agents wrote up to now is part of the export.
	b.evidence.WaitRun(tk, runID)
	plan, err := b.planExport(ctx, tk, runID)
	if err != nil {
		return exportWire(err)
	}
	if format == export.FormatTrace {
		t := export.NewTrace(w, runID, exportTraceID(w, tk, runID))
		if err := b.exportLedger(ctx, plan, t); err != nil {
			return err
		}
		if err := b.exportEvidence(ctx, plan, t.Evidence); err != nil {
			return err
		}
		return t.Close(plan.finished, plan.agents)
	}
	s := export.NewSemantic(w, runID, exportTraceID(w, tk, runID))
	if err := b.exportEvidence(ctx, plan, s.Evidence); err != nil {
		return err
	}
	return s.Close(plan.finished, plan.agents)
}

func exportWire(err error) error {
	if errors.Is(err, errExportGone) {
		return protocol.AppError(protocol.Gone, protocol.MsgRunGone, nil)
	}
	return wire(err)
}

func (b *Backend) planExport(ctx context.Context, tk, runID string) (exportPlan, error) {
	plan := exportPlan{tk: tk, runID: runID}
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, ok, err := loadRun(tx, tk, runID)
		if err != nil {
			return err
		}
		if !ok {
			if gone, err := wasDeleted(tx, tk, runID); err != nil || gone {
				return errors.Join(err, errExportGone)
			}
			return errNoRun
		}
		sub, err := b.seeds.get(tx, tk, runID)
		if err != nil {
			return err
		}
		plan.cursor, plan.finished = st.Cursor, st.Phase == PhaseFinished
		for _, e := range st.Execs {
			if sub.Runtime.Nodes[e.Node].Kind == KindAgent {
				plan.agents = append(plan.agents, e.Ref)
			}
		}
		return nil
	})
	if err != nil {
		return plan, err
	}
	plan.evidence, err = b.store.LastEvidence(ctx, tk, runID)
	return plan, err
}

// exportLedger writes the run's records up to the plan's cursor.
func (b *Backend) exportLedger(ctx context.Context, plan exportPlan, t *export.Trace) error {
	for after := uint64(0); after < plan.cursor; {
		var evs []store.Event
		err := b.store.View(ctx, func(tx store.ReadTx) error {
			var err error
			evs, err = tx.Events(plan.tk, plan.runID, after, exportPage)
			return err
		})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for _, ev := range evs {
			if ev.Seq > plan.cursor {
				return nil
			}
			t.Ledger(cursorString(ev.Seq), ev.Body)
			after = ev.Seq
		}
	}
	return nil
}

// exportEvidence passes the run's evidence up to the plan's last record
// to see.
func (b *Backend) exportEvidence(ctx context.Context, plan exportPlan, see func(export.Item)) error {
	for after := uint64(0); after < plan.evidence; {
		recs, err := b.store.EvidenceAfter(ctx, plan.tk, plan.runID, after, min(plan.evidence, math.MaxInt64), exportPage)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		for _, r := range recs {
			see(export.Item{Execution: r.Execution, Turn: r.Turn, Kind: r.Kind, Attr: r.Attr, Data: r.Data})
			after = r.ID
		}
	}
	return nil
}
