package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oecp/oecp/engine/harness"
)

// Agent usage adds up by harness, model and kind; cost only where
// reported.
func TestAgentUsage(t *testing.T) {
	m := New()
	m.AgentUsage("codex", "gpt-5.6", harness.Usage{Input: 100, CachedInput: 20, Output: 10, Reasoning: 5})
	m.AgentUsage("codex", "gpt-5.6", harness.Usage{Input: 50, Output: 1})
	m.AgentUsage("claude", "claude-sonnet-5", harness.Usage{Input: 7, Output: 3, CostUSD: 0.25})
	for _, c := range []struct {
		h, model, kind string
		want           float64
	}{
		{"codex", "gpt-5.6", "input", 150}, {"codex", "gpt-5.6", "cached_input", 20},
		{"codex", "gpt-5.6", "output", 11}, {"codex", "gpt-5.6", "reasoning", 5},
		{"claude", "claude-sonnet-5", "input", 7}, {"claude", "claude-sonnet-5", "output", 3},
	} {
		if got := value(t, m.agents.tokens.WithLabelValues(c.h, c.model, c.kind)); got != c.want {
			t.Errorf("%s/%s/%s = %v, want %v", c.h, c.model, c.kind, got, c.want)
		}
	}
	if got := value(t, m.agents.cost.WithLabelValues("claude", "claude-sonnet-5")); got != 0.25 {
		t.Errorf("claude cost %v", got)
	}
	ch := make(chan prometheus.Metric, 8)
	m.agents.cost.Collect(ch)
	if n := len(ch); n != 1 {
		t.Errorf("%d cost series; codex reports none", n)
	}
}

// value is a counter's current value.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
