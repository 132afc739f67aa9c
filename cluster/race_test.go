package cluster_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

func TestTwoConnectionsSameKeyCommitOnce(t *testing.T) {
	for i := range 20 {
		b := cluster.NewFixture(cluster.Isolated)
		c1, c2 := dial(t, b, identity.Local()), dial(t, b, identity.Local())
		req := `{"jsonrpc":"2.0","id":1,"method":"apply","params":{"graph":` + goldenGraph + `,"input":null,"ifGeneration":0,"idempotencyKey":"same"}}`
		var wg sync.WaitGroup
		got := make([]string, 2)
		for j, c := range []*wire{c1, c2} {
			wg.Go(func() { got[j] = c.call(req) })
		}
		testkit.Wait(t, &wg)
		fresh := `{"jsonrpc":"2.0","id":1,"result":{"generation":1,"runId":"run-1","phase":"running","deduped":false}}`
		dup := strings.Replace(fresh, `"deduped":false`, `"deduped":true`, 1)
		if !(got[0] == fresh && got[1] == dup) && !(got[0] == dup && got[1] == fresh) {
			t.Fatalf("round %d: %v", i, got)
		}
		g, _ := b.Get(bg, protocol.GetParams{})
		if *g.AtCursor != "cursor-1" {
			t.Fatalf("committed twice: %s", *g.AtCursor)
		}
	}
}

func TestRacingCASWritersExactlyOneWins(t *testing.T) {
	b := running(t)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = b.Apply(bg, applyP(graphWith(2000+i), fmt.Sprintf("k%d", i), ptr(int64(1))))
		})
	}
	testkit.Wait(t, &wg)
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errCode(err) != protocol.GenerationConflict || errDetails(err) != `{"currentGeneration":2}`:
			t.Fatalf("loser: %v %s", err, errDetails(err))
		}
	}
	if wins != 1 {
		t.Fatalf("%d winners", wins)
	}
	// Racing stale updates: the generation does not move, so both succeed,
	// but each appends exactly one record in a serial order.
	var ws sync.WaitGroup
	for i := range 8 {
		ws.Go(func() {
			if _, err := b.Update(bg, protocol.UpdateParams{LogLevel: ptr("warn"), IfGeneration: 2, IdempotencyKey: fmt.Sprintf("u%d", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	testkit.Wait(t, &ws)
	g, _ := b.Get(bg, protocol.GetParams{})
	if *g.AtCursor != "cursor-10" {
		t.Fatal(*g.AtCursor)
	}
}

func TestWatcherUnderConcurrentWritesSeesNoGapOrReorder(t *testing.T) {
	b := running(t)
	const writers, each = 4, 100
	subs := make([]*server.Subscription, 3)
	for i := range subs {
		s, err := b.Watch(bg, protocol.WatchParams{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stream.Close()
		subs[i] = s
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := b.Update(bg, protocol.UpdateParams{LogLevel: ptr("info"), IfGeneration: 1, IdempotencyKey: fmt.Sprintf("w%d-%d", w, i)})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	seqs := make([][]string, len(subs))
	var rg sync.WaitGroup
	ctx := testkit.Bounded(t)
	for i, s := range subs {
		rg.Go(func() {
			for j := 1; j <= writers*each+1; j++ {
				n, err := s.Stream.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n.Cursor != fmt.Sprintf("cursor-%d", j) {
					t.Errorf("subscriber %d: got %s want cursor-%d", i, n.Cursor, j)
					return
				}
				seqs[i] = append(seqs[i], string(n.Rest))
			}
		})
	}
	testkit.Wait(t, &wg)
	testkit.Wait(t, &rg)
	for i := 1; i < len(seqs); i++ {
		if strings.Join(seqs[i], "\n") != strings.Join(seqs[0], "\n") {
			t.Fatal("subscribers saw different sequences")
		}
	}
}

// fold folds a deduplicated continuous watch into a ClusterStatus.
func fold(t *testing.T, events []server.Notification) protocol.ClusterStatus {
	t.Helper()
	var st protocol.ClusterStatus
	seen := map[string]bool{}
	for _, n := range events {
		var ev struct {
			RunID  string              `json:"runId"`
			Cursor string              `json:"cursor"`
			Event  protocol.WatchEvent `json:"event"`
		}
		if err := json.Unmarshal(append(append([]byte("{"), n.Rest[1:]...), '}'), &ev); err != nil {
			t.Fatal(err)
		}
		if seen[ev.RunID+"/"+ev.Cursor] {
			continue // at-least-once delivery: dedupe by (runId, cursor)
		}
		seen[ev.RunID+"/"+ev.Cursor] = true
		switch ev.Event.Type {
		case protocol.EventPhase:
			st = *ev.Event.Status
		case protocol.EventFinished:
			st = *ev.Event.FinalStatus
		default:
			c := ev.Cursor
			st.AtCursor = &c
			if st.Operational != nil {
				switch ev.Event.Type {
				case protocol.EventNodeBegin:
					st.Operational.InFlight++
				case protocol.EventNodeEnd:
					st.Operational.InFlight--
				}
			}
		}
	}
	return st
}

func TestPropertyDedupedContinuousWatchFoldsToGet(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := cluster.NewFixture(cluster.Isolated)
		s, err := b.Watch(bg, protocol.WatchParams{}) // parked: sees the run from admission
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Apply(bg, applyP(goldenGraph, "create", nil)); err != nil {
			t.Fatal(err)
		}
		r := drive(t, b, "local")
		var open []uint64
		steps := 5 + rng.IntN(40)
		for i := range steps {
			key := fmt.Sprintf("op-%d", i)
			switch rng.IntN(9) {
			case 0:
				_, _ = b.Update(bg, protocol.UpdateParams{HasLabels: true, Labels: map[string]string{"i": key}, IfGeneration: 1, IdempotencyKey: key})
			case 1:
				_, _ = b.Update(bg, protocol.UpdateParams{Suspended: ptr(rng.IntN(2) == 0), LogLevel: ptr(protocol.LogLevels[rng.IntN(5)]), IfGeneration: 1, IdempotencyKey: key})
			case 2, 3:
				if x, err := r.dispatch("worker", protocol.Null); err == nil {
					open = append(open, x)
				}
			case 4:
				if len(open) > 0 {
					x := open[0]
					open = open[1:]
					if rng.IntN(2) == 0 {
						_ = r.succeed(x)
					} else if _ = r.fail(x); rng.IntN(2) == 0 {
						_ = r.hold(x)
					}
				}
			case 5:
				_, _ = b.Retry(bg, protocol.RetryParams{IfGeneration: 1, IdempotencyKey: key})
			case 6:
				if len(open) > 0 {
					_ = r.crash(open[0])
					open = open[1:]
				}
			case 7:
				k := "same-" + key
				_, _ = b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), IdempotencyKey: &k})
			case 8:
				if rng.IntN(4) == 0 {
					_, _ = b.Stop(bg, protocol.StopParams{Mode: []string{"drain", "force"}[rng.IntN(2)], IfGeneration: 1, IdempotencyKey: key})
				}
			}
		}
		g, _ := b.Get(bg, protocol.GetParams{})
		var tail int
		fmt.Sscanf(*g.AtCursor, "cursor-%d", &tail)
		events := nextN(t, s.Stream, tail)
		s.Stream.Close()
		// A reconnect from an earlier cursor redelivers a suffix.
		mid := events[len(events)/2].Cursor
		s2, err := b.Watch(bg, protocol.WatchParams{RunID: ptr("run-1"), FromCursor: &mid})
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, nextN(t, s2.Stream, tail-len(events)/2-1)...)
		s2.Stream.Close()
		if got, want := mustJSON(t, fold(t, events)), mustJSON(t, g.Status); got != want {
			t.Fatalf("seed %d:\n fold %s\n get  %s", seed, got, want)
		}
	}
}
