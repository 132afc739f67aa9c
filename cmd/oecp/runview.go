package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// graphInfo is what the human output needs from a run's admitted graph:
// each executable's attempt budget, and whether it runs once per map item
// or once per loop iteration.
type graphInfo struct {
	attempts map[string]int64
	inMap    map[string]bool
	inLoop   map[string]bool
}

// readGraphInfo reads spec (a GraphSpec); an undecodable one gives an
// empty graphInfo (every node one attempt, neither mapped nor looped).
func readGraphInfo(spec json.RawMessage) graphInfo {
	gi := graphInfo{attempts: map[string]int64{}, inMap: map[string]bool{}, inLoop: map[string]bool{}}
	g, err := graph.Decode(spec)
	if err != nil {
		return gi
	}
	kinds := map[string]graph.NodeKind{}
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		kinds[n.NodeName()] = n.NodeKind()
		return true
	})
	graph.Walk(g, func(n graph.Node, path graph.Path, _ int) bool {
		name := n.NodeName()
		switch t := n.(type) {
		case *graph.Step:
			gi.attempts[name] = int64(t.Attempts)
		case *graph.Verifier:
			gi.attempts[name] = int64(t.Attempts)
		}
		for _, seg := range path[:len(path)-1] {
			if seg.Kind == graph.SegmentNode {
				gi.inMap[name] = gi.inMap[name] || kinds[seg.Name] == graph.KindMap
				gi.inLoop[name] = gi.inLoop[name] || kinds[seg.Name] == graph.KindLoop
			}
		}
		return true
	})
	return gi
}

// budget is node's attempts per visit (at least 1).
func (gi graphInfo) budget(node string) int64 { return max(gi.attempts[node], 1) }

// failure is a step's failed attempt.
type failure struct {
	node           string
	attempt        int64
	code, reason   string
	finalAttempt   bool // the attempt used up the node's budget
	reportedAsHeld bool
}

// heldLine is how get and watch show a run held on f.
func (f *failure) heldLine() string {
	n := "attempts"
	if f.attempt == 1 {
		n = "attempt"
	}
	return fmt.Sprintf("held: %s failed (%s, %s) after %d %s — oecp retry | oecp stop", f.node, f.code, f.reason, f.attempt, n)
}

// runTracker folds a run's events into what the human output says: the
// admitted graph, the dispatch state, the operational settings, the
// latest failure and whether the run holds on it, and the item (map) or
// iteration (loop) number of each dispatch.
//
// The engine records a hold as a bookmark once nothing is in flight after
// a step's last attempt failed (with no error route in the graph), so a
// bookmark that follows such a failure, with no dispatch of that node
// since and the run not stopping, is the hold; the next bookmark is the
// retry that ends it (until the node is dispatched again). Map items run
// concurrently and node_end does not say which item ended, so an end is
// numbered only when it is known which dispatch of its node it ends.
type runTracker struct {
	info      graphInfo
	op        *protocol.OperationalStatus
	failure   *failure
	held      *failure          // the failure the run holds on, nil when not held
	visits    map[string]int    // attempt-1 dispatches of each node
	inFlight  map[string][]int  // item/iteration numbers of each node in flight
	inputs    map[string][]byte // input of each node's latest visit, by number
	ambiguous map[string]bool   // nodes with an end not known to be which dispatch's
	ends      map[string]int    // settlements of each node so far
}

func newRunTracker() *runTracker {
	return &runTracker{visits: map[string]int{}, inFlight: map[string][]int{}, inputs: map[string][]byte{}, ambiguous: map[string]bool{}, ends: map[string]int{}}
}

// observe folds ev and reports whether the run now holds (the moment to
// say so).
func (t *runTracker) observe(ev protocol.WatchEvent) (heldNow bool) {
	switch ev.Type {
	case protocol.EventPhase:
		if ev.Admission != nil {
			t.info = readGraphInfo(ev.Admission.Spec)
		}
		if ev.Status != nil && ev.Status.Operational != nil {
			t.op = ev.Status.Operational
			if stopping(t.op.DispatchState) {
				t.held = nil
			}
		}
	case protocol.EventNodeBegin:
		t.held = nil
		if ev.Node != nil && t.failure != nil && t.failure.node == ev.Node.Node {
			t.failure = nil
		}
	case protocol.EventNodeEnd:
		if ev.Node == nil {
			break
		}
		if o := decodeOutcome(ev.Outcome); o.Status == "error" {
			t.failure = &failure{node: ev.Node.Node, attempt: ev.Node.Attempt, code: o.Code, reason: o.Reason,
				finalAttempt: ev.Node.Attempt >= t.info.budget(ev.Node.Node)}
		}
	case protocol.EventBookmark:
		f := t.failure
		switch {
		case f != nil && f.reportedAsHeld:
			t.held = nil // a bookmark after the hold: a retry was granted
		case f != nil && f.finalAttempt && (t.op == nil || !stopping(t.op.DispatchState)):
			f.reportedAsHeld = true
			t.held = f
			return true
		}
	case protocol.EventFinished:
		t.held, t.failure = nil, nil
	}
	return false
}

func stopping(dispatch string) bool {
	return dispatch == protocol.DispatchDraining || dispatch == protocol.DispatchForceStopping || dispatch == protocol.DispatchStopped
}

// label names a node's dispatch or settlement for people: "echo",
// "echoItem[3]" (map item, from 0), "review (iteration 2)" (loop).
func (t *runTracker) label(ev protocol.WatchEvent) string {
	n := ev.Node.Node
	mapped, looped := t.info.inMap[n], t.info.inLoop[n]
	if !mapped && !looped {
		return n
	}
	var num int
	known := true
	if ev.Type == protocol.EventNodeBegin {
		num = t.begin(n, ev)
	} else {
		t.ends[n]++
		num, known = t.end(n)
	}
	switch {
	case !known && mapped:
		// Which item ended is not known: number the end among the
		// node's dispatches instead.
		return fmt.Sprintf("%s[?] (end %d of %d)", n, t.ends[n], t.visits[n])
	case !known:
		return n
	case mapped:
		return n + "[" + strconv.Itoa(num) + "]"
	}
	return n + " (iteration " + strconv.Itoa(num+1) + ")"
}

// begin numbers a dispatch: a first attempt is the node's next visit; a
// later attempt is the visit whose input it repeats (else the latest).
func (t *runTracker) begin(n string, ev protocol.WatchEvent) int {
	var in []byte
	if ev.Input != nil {
		in = *ev.Input
	}
	num := t.visits[n] - 1
	if ev.Node.Attempt <= 1 {
		num = t.visits[n]
		t.visits[n]++
		t.inputs[n+"\x00"+strconv.Itoa(num)] = in
	} else {
		for i := t.visits[n] - 1; i >= 0; i-- {
			if string(t.inputs[n+"\x00"+strconv.Itoa(i)]) == string(in) {
				num = i
				break
			}
		}
	}
	t.inFlight[n] = append(t.inFlight[n], num)
	return num
}

// end numbers a settlement when it is known which dispatch of the node
// ended: the only one in flight, and none of its ends was ambiguous since
// the node last had nothing in flight.
func (t *runTracker) end(n string) (int, bool) {
	f := t.inFlight[n]
	switch {
	case len(f) == 0:
		return 0, false
	case len(f) == 1:
		delete(t.inFlight, n)
		known := !t.ambiguous[n]
		delete(t.ambiguous, n)
		return f[0], known
	}
	t.inFlight[n] = f[1:] // which one ended is not known
	t.ambiguous[n] = true
	return 0, false
}

// decodeOutcome reads a node_end's WorkerOutcome (zero when it does not
// decode).
func decodeOutcome(raw json.RawMessage) worker.Outcome {
	var o worker.Outcome
	_ = json.Unmarshal(raw, &o)
	return o
}

// replayRun feeds fn the current run's events up to its tail at the time
// of the call, and returns the run id ("" when there is no run).
func replayRun(ctx context.Context, conn *client.Conn, fn func(client.WatchEvent)) (string, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, res, err := conn.Watch(wctx, client.WatchParams{})
	if err != nil {
		return "", err
	}
	defer sub.Close()
	if res.RunID == nil || res.AtCursor == nil {
		return "", nil
	}
	for ev := range sub.Events() {
		fn(ev)
		if ev.Cursor == *res.AtCursor {
			break
		}
	}
	return *res.RunID, sub.Err()
}
