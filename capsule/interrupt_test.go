package capsule_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/store"
)

// TestGracefulRestartInterrupts: a capsule closed while a step with one
// attempt runs records the execution interrupted (a fault naming it, code
// unavailable, no node_end), and the next capsule on the same store runs
// the same attempt again and finishes the run: a graceful restart costs
// no attempt and does not hold the run.
func TestGracefulRestartInterrupts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		t.Cleanup(func() { _ = mem.Close() })
		first := start(t, capsule.Options{Store: noClose{mem}})
		run := first.apply(spec(seq("main", sleepStep("nap", attempts(1)), succeedText("done")), "ms"), `{"text":"hi","ms":10000}`)
		synctest.Wait() // nap is dispatched and sleeping
		if err := first.c.Close(); err != nil {
			t.Fatal(err)
		}

		second := start(t, capsule.Options{Store: noClose{mem}})
		time.Sleep(time.Minute)
		synctest.Wait()
		wantTerminal(t, second.get(), "succeeded", hi)
		es := second.history(*run.RunID)
		var got []string
		for _, ev := range es[1:] {
			got = append(got, ev.Event.Type)
		}
		want := []string{"node_begin", "fault", "node_begin", "node_end", "finished"}
		if len(got) != len(want) {
			t.Fatalf("events:%s", es)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events:%s", es)
			}
		}
		f := es[2].fault(t)
		if f.ExecutionRef != *run.RunID+"/nap/1" || f.Code != "unavailable" || f.Consequence != "no_observable_effect" {
			t.Fatalf("interrupt fault %+v", f)
		}
		if es[3].Event.Node.Attempt != 1 || es[4].Event.Node.Attempt != 1 || es[4].outcome(t).Status != "verified" {
			t.Fatalf("the same attempt must run again and succeed:%s", es)
		}
	})
}
