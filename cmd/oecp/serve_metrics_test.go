package main

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads /metrics of the server at wsURL.
func scrape(t *testing.T, wsURL string) map[string]*dto.MetricFamily {
	t.Helper()
	u, err := url.Parse(wsURL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + u.Host + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample is the value of the series of family with exactly labels
// ("k=v" each); ok is false when there is none.
func sample(fams map[string]*dto.MetricFamily, family string, labels ...string) (float64, bool) {
	f, ok := fams[family]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(got)
		want := slices.Clone(labels)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// settled scrapes until every gauge in want has its value (connections
// and subscriptions close, and the supervisor's next pass runs, after
// the client has its answer), and returns that scrape.
func settled(t *testing.T, wsURL string, want map[string]float64) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams := scrape(t, wsURL)
		done := true
		for k, v := range want {
			family, labels, _ := strings.Cut(k, " ")
			var ls []string
			if labels != "" {
				ls = strings.Split(labels, ",")
			}
			if got, _ := sample(fams, family, ls...); got != v {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			return fams
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMetricsAfterAGraph scrapes a server that ran a graph (and saw a
// duplicate id and two cancels) and checks each family and value.
func TestMetricsAfterAGraph(t *testing.T) {
	srv := startServer(t, "--fault-delay", "stop=1h")
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--watch"), 0, []string{"run run-1 succeeded"}, nil)

	// A stop held by the fault delay, the same id again (refused), a cancel
	// of it (effective) and one of nothing (not).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := ws.Dial(ctx, srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"stop","params":{"mode":"drain","ifGeneration":1,"idempotencyKey":"k"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"stop","params":{"mode":"drain","ifGeneration":1,"idempotencyKey":"k"}}`,
	} {
		if err := c.Write(ctx, ws.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, got, err := c.Read(ctx); err != nil || !strings.Contains(string(got), "DUPLICATE_REQUEST_ID") {
		t.Fatalf("second id 1: %s, %v", got, err)
	}
	for _, f := range []string{
		`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`,
		`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":99}}`,
		`{"jsonrpc":"2.0","id":2,"method":"nope","params":{}}`,
	} {
		if err := c.Write(ctx, ws.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, got, err := c.Read(ctx); err != nil || !strings.Contains(string(got), "Method not found") {
		t.Fatalf("nope: %s, %v", got, err)
	}
	_ = c.Close(ws.StatusNormalClosure, "")

	fams := settled(t, srv.url, map[string]float64{
		`oecp_connections_open binding=websocket`:      0,
		`oecp_subscriptions_open method=watch`:         0,
		`oecp_runs_active`:                             0,
		`oecp_executions_active worker=builtin.echo@1`: 0,
	})
	for _, c := range []struct {
		family string
		labels []string
		want   float64 // -1: any positive value
	}{
		{"oecp_connections_open", []string{"binding=websocket"}, 0},
		{"oecp_requests_total", []string{"method=get", "code=ok"}, 1},
		{"oecp_requests_total", []string{"method=apply", "code=ok"}, 1},
		{"oecp_requests_total", []string{"method=watch", "code=ok"}, 1},
		{"oecp_requests_total", []string{"method=other", "code=METHOD_NOT_FOUND"}, 1},
		{"oecp_request_duration_seconds", []string{"method=apply"}, 1},
		{"oecp_request_duration_seconds", []string{"method=watch"}, 1},
		{"oecp_requests_refused_total", []string{"reason=duplicate_id"}, 1},
		{"oecp_requests_refused_total", []string{"reason=busy"}, 0},
		{"oecp_requests_refused_total", []string{"reason=tenant_rate"}, 0},
		{"oecp_cancels_received_total", nil, 2},
		{"oecp_cancels_effective_total", nil, 1},
		{"oecp_subscriptions_open", []string{"method=watch"}, 0},
		{"oecp_events_delivered_total", []string{"method=watch"}, -1},
		{"oecp_slow_consumer_closes_total", []string{"method=watch"}, 0},
		{"oecp_runs_active", nil, 0},
		{"oecp_runs_finished_total", []string{"outcome=succeeded"}, 1},
		{"oecp_runs_finished_total", []string{"outcome=failed"}, 0},
		{"oecp_executions_active", []string{"worker=builtin.echo@1"}, 0},
		{"oecp_executions_settled_total", []string{"worker=builtin.echo@1", "outcome=ok"}, 1},
		{"oecp_dispatch_start_latency_seconds", nil, 1},
		{"oecp_store_commit_duration_seconds", nil, -1},
		{"oecp_store_commit_failures_total", nil, 0},
		{"oecp_lease_takeovers_total", nil, 0},
		{"oecp_retention_compacted_runs_total", nil, 0},
		{"oecp_requests_refused_total", []string{"reason=tenant_subscriptions"}, 0},
		{"go_goroutines", nil, -1},
		{"process_open_fds", nil, -1},
	} {
		got, ok := sample(fams, c.family, c.labels...)
		if !ok || (c.want >= 0 && got != c.want) || (c.want < 0 && got <= 0) {
			t.Errorf("%s%v = %v (present %v), want %v", c.family, c.labels, got, ok, c.want)
		}
	}
	// The watch of a one-step run: run started, node begin and end, run
	// finished, each delivered once.
	if got, _ := sample(fams, "oecp_events_delivered_total", "method=watch"); got < 4 {
		t.Errorf("watch events delivered = %v, want at least 4", got)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "oecp_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("unexpected family %s", name)
		}
	}
}
