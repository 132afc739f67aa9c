package harness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/oecp/oecp/engine/harness/agentstream"
)

// Usage is what a provider reported a turn consumed, as the CLI's stream
// gives it (agentstream.Usage: Input counts every input token, cached
// ones included; CachedInput is the cached part; CostUSD is the
// provider-side cost the CLI reported, zero from Codex).
type Usage agentstream.Usage

// Plus is u and v added up.
func (u Usage) Plus(v Usage) Usage {
	return Usage{u.Input + v.Input, u.CachedInput + v.CachedInput, u.Output + v.Output, u.Reasoning + v.Reasoning, u.CostUSD + v.CostUSD}
}

// since is the growth of a cumulative report u over an earlier one; a
// counter that went down (a thread the CLI restarted) counts from zero.
func (u Usage) since(base Usage) Usage {
	d := func(now, then int64) int64 {
		if now < then {
			return now
		}
		return now - then
	}
	c := u.CostUSD - base.CostUSD
	if c < 0 {
		c = u.CostUSD
	}
	return Usage{d(u.Input, base.Input), d(u.CachedInput, base.CachedInput), d(u.Output, base.Output), d(u.Reasoning, base.Reasoning), c}
}

// String is the usage as a log line.
func (u Usage) String() string {
	s := fmt.Sprintf("usage: input %d tokens (%d cached), output %d (%d reasoning)", u.Input, u.CachedInput, u.Output, u.Reasoning)
	if u.CostUSD > 0 {
		s += fmt.Sprintf(", cost %.6f USD", u.CostUSD)
	}
	return s
}

// UsageObserver sees the usage of every agent turn (metrics). harness is
// the plan's harness and model the node's catalogue model, never a name a
// CLI reports.
type UsageObserver interface {
	AgentUsage(harness, model string, u Usage)
}

// Spending is one run's reported agent cost kept where every server of
// the run reads it (the run's record in the ledger), so that a server that
// takes the run over continues its budget from what was spent.
type Spending interface {
	// Spent is what the run's agents reported so far.
	Spent(ctx context.Context) (float64, error)
	// AddSpent adds usd and returns the run's new total.
	AddSpent(ctx context.Context, usd float64) (float64, error)
}

// budget sums the reported cost of each run's agent turns against an
// operator limit; a zero limit is no limit. A job's Spending, when set,
// keeps the sum; spent keeps it otherwise, and as the last sum known when
// the Spending cannot be read or written (the store is unavailable).
type budget struct {
	maxUSD float64
	mu     sync.Mutex
	spent  map[string]float64 // by run
}

// charge adds a turn's cost to its run and returns the run's total and
// whether it is over the limit.
func (b *budget) charge(ctx context.Context, job Job, usd float64) (float64, bool) {
	if b.maxUSD <= 0 {
		return 0, false
	}
	if job.Spending != nil {
		// A turn that ended with its context still cost what it reported.
		total, err := job.Spending.AddSpent(context.WithoutCancel(ctx), usd)
		if err == nil {
			total = b.remember(job.Key, total, 0)
			return total, total > b.maxUSD
		}
		slog.WarnContext(ctx, "agent budget: the run's spending was not recorded; this server counts it", "run", job.Key, "err", err)
	}
	total := b.remember(job.Key, 0, usd)
	return total, total > b.maxUSD
}

// over reports whether a run already spent more than the limit.
func (b *budget) over(ctx context.Context, job Job) (float64, bool) {
	if b.maxUSD <= 0 {
		return 0, false
	}
	if job.Spending != nil {
		spent, err := job.Spending.Spent(ctx)
		if err == nil {
			spent = b.remember(job.Key, spent, 0)
			return spent, spent > b.maxUSD
		}
		slog.WarnContext(ctx, "agent budget: the run's spending was not read; this server's count applies", "run", job.Key, "err", err)
	}
	spent := b.remember(job.Key, 0, 0)
	return spent, spent > b.maxUSD
}

// remember raises a run's known spending to at least total, adds usd, and
// returns it.
func (b *budget) remember(run string, total, usd float64) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent == nil {
		b.spent = map[string]float64{}
	}
	b.spent[run] = max(b.spent[run], total) + usd
	return b.spent[run]
}

// forget drops a finished run.
func (b *budget) forget(run string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.spent, run)
}
