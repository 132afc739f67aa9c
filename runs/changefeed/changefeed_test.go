package changefeed_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/runs/changefeed"
)

func ref(id string) engine.RunRef { return engine.RunRef{Tenant: `n:"t"`, RunID: id} }

// TestEveryFeedGetsEveryRunOnce: a run named to the set is held by every
// feed, once however often it was named, until that feed's Take; a feed
// subscribed later gets only the runs named after it.
func TestEveryFeedGetsEveryRunOnce(t *testing.T) {
	var set changefeed.Feeds
	a := set.Subscribe()
	set.Changed(ref("r1"))
	b := set.Subscribe()
	set.Changed(ref("r2"))
	set.Changed(ref("r2"))
	got, overflow := a.Take()
	slices.SortFunc(got, func(x, y engine.RunRef) int { return strings.Compare(x.RunID, y.RunID) })
	if overflow || !slices.Equal(got, []engine.RunRef{ref("r1"), ref("r2")}) {
		t.Fatalf("first feed: %v %v", got, overflow)
	}
	if got, _ := a.Take(); len(got) != 0 {
		t.Fatalf("a second Take returned %v", got)
	}
	if got, overflow := b.Take(); overflow || !slices.Equal(got, []engine.RunRef{ref("r2")}) {
		t.Fatalf("later feed: %v %v", got, overflow)
	}
}

// TestOverflowAsksForAFullPass: a feed past MaxRuns forgets its runs and
// reports an overflow once; it names runs again after that Take.
func TestOverflowAsksForAFullPass(t *testing.T) {
	var set changefeed.Feeds
	f := set.Subscribe()
	for i := range changefeed.MaxRuns + 1 {
		set.Changed(engine.RunRef{Tenant: "t", RunID: fmt.Sprint(i)})
	}
	set.Changed(ref("late"))
	if got, overflow := f.Take(); !overflow || len(got) != 0 {
		t.Fatalf("past the bound: %d runs, overflow %v", len(got), overflow)
	}
	set.Changed(ref("next"))
	if got, overflow := f.Take(); overflow || !slices.Equal(got, []engine.RunRef{ref("next")}) {
		t.Fatalf("after the overflow was read: %v %v", got, overflow)
	}
}

// TestNamedIsClosedByTheNextRun: the channel Named returns is closed once
// a run is named after the call, not before.
func TestNamedIsClosedByTheNextRun(t *testing.T) {
	var set changefeed.Feeds
	f := set.Subscribe()
	named := f.Named()
	select {
	case <-named:
		t.Fatal("closed before any run was named")
	default:
	}
	set.Changed(ref("r"))
	select {
	case <-named:
	default:
		t.Fatal("not closed after a run was named")
	}
}
