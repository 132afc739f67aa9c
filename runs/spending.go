package runs

import (
	"context"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/store"
)

// Spending is one run's reported agent cost, kept in the run's record
// (runState.SpentUSD) as each turn reports it, so that the server that
// takes the run over continues the run's budget from what was spent.
type Spending interface {
	// Spent is the cost recorded so far.
	Spent(ctx context.Context) (float64, error)
	// AddSpent records usd more and returns the run's total; it is
	// fenced by the run's lease, as every write for the run.
	AddSpent(ctx context.Context, usd float64) (float64, error)
}

// runSpending is a run's Spending in its record.
type runSpending struct {
	l   *Ledger
	ref engine.RunRef
}

func (s runSpending) Spent(ctx context.Context) (float64, error) {
	var spent float64
	err := s.l.b.store.View(ctx, func(tx store.ReadTx) error {
		st, _, ok, err := loadRun(tx, s.ref.Tenant, s.ref.RunID)
		if err != nil || !ok {
			return orNoRun(err)
		}
		spent = st.SpentUSD
		return nil
	})
	return spent, err
}

func (s runSpending) AddSpent(ctx context.Context, usd float64) (float64, error) {
	var total float64
	err := s.l.write(ctx, s.ref, func(_ store.Tx, st *runState) error {
		st.SpentUSD += usd
		total = st.SpentUSD
		return nil
	})
	return total, err
}
