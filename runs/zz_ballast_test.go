package runs_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/runs"
)

var sink any

func BenchmarkZZBallast(b *testing.B) {
	var cost [2]opCost
	var dur [2]time.Duration
	n := [2]int{}
	for b.Loop() {
		for i := range 8 {
			w := i % 2
			if w == 1 {
				bl := make([]*runs.Submission, 16000)
				for j := range bl {
					bl[j] = &runs.Submission{Title: fmt.Sprint(j), Runtime: runs.RuntimePlan{Nodes: map[string]runs.Binding{"echo": {Kind: "agent", Model: "m"}}}}
				}
				sink = bl
			} else {
				sink = nil
			}
			runtime.GC()
			s := benchSQLite(b)
			q := newQueueRig(b, s, capsule.DefaultMaxActive, deepShallow)
			c0 := readOpCost()
			t0 := time.Now()
			q.run(b, func() {})
			dur[w] += time.Since(t0)
			cost[w] = cost[w].add(readOpCost().minus(c0))
			n[w] += deepShallow
			q.stop()
			_ = s.Close()
		}
	}
	sink = nil
	cost[0].report(b, n[0], "@plain")
	cost[1].report(b, n[1], "@ballast")
	b.ReportMetric(dur[1].Seconds()/dur[0].Seconds(), "time-ratio")
}
