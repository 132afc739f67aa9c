package main

import (
	"fmt"
	"math"

	"github.com/spf13/pflag"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/metrics"
)

// agentAccounting is what `oecp serve` does with the usage agent turns
// report: metrics, and an optional cost budget per run.
type agentAccounting struct {
	// maxUSDPerRun ends a run's agent executions once its agents reported
	// more cost (0: no budget).
	maxUSDPerRun float64
}

func (a *agentAccounting) addFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&a.maxUSDPerRun, "max-agent-usd-per-run", 0, "end a native run's agent executions as refusal once its agents reported more than `USD` of cost; it counts only reported cost (Claude Code reports it, Codex does not) (0: no budget)")
}

func (a agentAccounting) validate() error {
	if a.maxUSDPerRun < 0 || math.IsNaN(a.maxUSDPerRun) || math.IsInf(a.maxUSDPerRun, 0) {
		return fmt.Errorf("--max-agent-usd-per-run %v: want 0 (no budget) or a positive amount", a.maxUSDPerRun)
	}
	return nil
}

// apply makes the harness configuration's runners report usage to m (when
// set) and keep the budget.
func (a agentAccounting) apply(c *harness.Config, m *metrics.Metrics) {
	var obs harness.UsageObserver
	if m != nil {
		obs = m
	}
	c.SetAccounting(obs, a.maxUSDPerRun)
}
