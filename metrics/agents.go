package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oecp/oecp/engine/harness"
)

// agentMetrics counts what coding agents reported consuming. Labels are
// the plan's harness (codex, claude) and the node's catalogue model (a
// closed set admission checks), never a model name a CLI reports.
type agentMetrics struct {
	tokens *prometheus.CounterVec
	cost   *prometheus.CounterVec
}

func newAgentMetrics(f factory) agentMetrics {
	return agentMetrics{
		tokens: f.counterVec("agent_tokens_total", "Tokens agent turns reported, by harness, catalogue model and kind (input: all input tokens, cached ones included; cached_input; output: all output tokens, reasoning included; reasoning).", "harness", "model", "kind"),
		cost:   f.counterVec("agent_cost_usd_total", "Cost in USD agent turns reported (Claude Code reports it, Codex does not), by harness and catalogue model.", "harness", "model"),
	}
}

// AgentUsage implements harness.UsageObserver.
func (m *Metrics) AgentUsage(h, model string, u harness.Usage) {
	for _, k := range []struct {
		kind string
		n    int64
	}{{"input", u.Input}, {"cached_input", u.CachedInput}, {"output", u.Output}, {"reasoning", u.Reasoning}} {
		if k.n > 0 {
			m.agents.tokens.WithLabelValues(h, model, k.kind).Add(float64(k.n))
		}
	}
	if u.CostUSD > 0 {
		m.agents.cost.WithLabelValues(h, model).Add(u.CostUSD)
	}
}
