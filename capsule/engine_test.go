package capsule_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/protocol"
)

// Engine tests per node kind and join mode, through the real cluster
// methods of a started capsule (built-in workers and small command
// workers). Progress is awaited on store commits, never on sleeps.

const hi = `{"text":"hi"}`

func TestStep(t *testing.T) {
	e := start(t, capsule.Options{})
	run := e.apply(spec(seq("main", step("echo", "builtin.echo@1", writes(wOut("echo", "text", "text"))), succeedText("done"))), hi)
	wantTerminal(t, e.waitFinished(), "succeeded", hi)
	es := e.history(*run.RunID)
	var types []string
	for _, ev := range es {
		types = append(types, ev.Event.Type)
	}
	if got := strings.Join(types, ","); got != "phase,node_begin,node_end,finished" {
		t.Fatalf("events %s:%s", got, es)
	}
	if b := es[1]; b.Event.Node.Node != "echo" || b.Event.Node.Attempt != 1 || string(b.Event.Input) != hi {
		t.Fatalf("node_begin %s", b)
	}
	if o := es[2].outcome(t); o.Status != "verified" || string(o.Output) != hi {
		t.Fatalf("node_end %s", es[2])
	}
}

func TestVerifierChoiceOnSignal(t *testing.T) {
	for _, c := range []struct {
		worker, status, result string
	}{
		{"builtin.approve@1", "succeeded", hi},
		{"builtin.reject@1", "failed", "notApproved"},
	} {
		t.Run(c.worker, func(t *testing.T) {
			e := start(t, capsule.Options{})
			e.apply(spec(seq("main",
				verif("review", c.worker),
				choice("route", failWith("refused", "notApproved"),
					when(gIn(ctl("review", "signal", "verdict"), "approved"), succeedText("accepted"))),
			)), hi)
			wantTerminal(t, e.waitFinished(), c.status, c.result)
		})
	}
}

func TestSeqPassesStateAlong(t *testing.T) {
	e := start(t, capsule.Options{})
	run := e.apply(spec(seq("main",
		step("first", "builtin.echo@1", writes(wOut("first", "text", "text"))),
		seqP("inner", []opts{promote("text")},
			step("second", "builtin.echo@1", writes(wOut("second", "text", "text"))),
			step("third", "builtin.echo@1", writes(wOut("third", "text", "text")))),
		succeedText("done"))), `{"text":"x"}`)
	wantTerminal(t, e.waitFinished(), "succeeded", `{"text":"x"}`)
	var order []string
	for _, ev := range e.history(*run.RunID).of(protocol.EventNodeBegin, "") {
		order = append(order, ev.Event.Node.Node)
	}
	if got := strings.Join(order, ","); got != "first,second,third" {
		t.Fatalf("dispatch order %s", got)
	}
}

// TestParJoins runs a three-branch par under every join. Slow branches
// (builtin.sleep for a minute) lose the any/first/quorum joins: each is
// voided (a fault with no_observable_effect naming its execution) and
// never ends.
func TestParJoins(t *testing.T) {
	slow := func(name string) M { return sleepStep(name, timeout(120000)) }
	for _, c := range []struct {
		name     string
		join     M
		branches []M
		voided   []string
	}{
		{"all", M{"kind": "all"}, []M{step("a", "builtin.echo@1"), verif("b", "builtin.approve@1"), verif("c", "builtin.reject@1")}, nil},
		{"any", M{"kind": "any"}, []M{step("a", "builtin.echo@1"), slow("b"), slow("c")}, []string{"b", "c"}},
		{"first", M{"kind": "first", "when": gIn(ctl("b", "signal", "verdict"), "approved")},
			[]M{slow("a"), verif("b", "builtin.approve@1"), slow("c")}, []string{"a", "c"}},
		{"quorum", M{"kind": "quorum", "count": 2}, []M{step("a", "builtin.echo@1"), slow("b"), verif("c", "builtin.approve@1")}, []string{"b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, capsule.Options{})
			run := e.apply(spec(seq("main", par("fanout", c.join, c.branches...), succeedText("done")), "ms"), `{"text":"hi","ms":60000}`)
			wantTerminal(t, e.waitFinished(), "succeeded", hi)
			es := e.history(*run.RunID)
			if n := len(es.of(protocol.EventNodeBegin, "")); n != 3 {
				t.Fatalf("%d dispatches, want 3:%s", n, es)
			}
			faults := es.of(protocol.EventFault, "")
			if len(faults) != len(c.voided) {
				t.Fatalf("%d faults, want voids of %v:%s", len(faults), c.voided, es)
			}
			for i, node := range c.voided {
				f := faults[i].fault(t)
				if f.Consequence != "no_observable_effect" || f.ExecutionRef != *run.RunID+"/"+node+"/1" {
					t.Fatalf("fault %d = %+v, want the void of %s", i, f, node)
				}
				if n := len(es.of(protocol.EventNodeEnd, node)); n != 0 {
					t.Fatalf("voided %s also ended:%s", node, es)
				}
			}
			if n := len(es.of(protocol.EventNodeEnd, "")); n != 3-len(c.voided) {
				t.Fatalf("%d node_end, want %d:%s", n, 3-len(c.voided), es)
			}
		})
	}
}

// countingVerdict is a command verifier that rejects its first `rejects`
// runs and approves afterwards.
func countingVerdict(t *testing.T, ref string, rejects int) worker.CommandSpec {
	dir := t.TempDir()
	s := script(t, dir, "verdict.sh", fmt.Sprintf(`n=$(cat %[1]s/count 2>/dev/null || echo 0)
n=$((n+1)); echo $n > %[1]s/count
if [ $n -le %[2]d ]; then echo '{"signals":{"verdict":"rejected"}}'; else echo '{"signals":{"verdict":"approved"}}'; fi
`, dir, rejects))
	return verifierCmd(t, ref, s)
}

func TestLoop(t *testing.T) {
	repair := func(checker string, until M, max int) M {
		body := seqP("attempt", []opts{promote("text")},
			step("fix", "builtin.echo@1", writes(wOut("fix", "text", "text"))),
			verif("check", checker))
		return spec(seq("main",
			loop("repair", body, until, max, promote("text")),
			choice("route", failWith("gaveUp", "exhausted"),
				when(gIn(ctl("repair", "group", "terminated"), "converged"), succeedText("repaired")))))
	}
	approved := gIn(ctl("check", "signal", "verdict"), "approved")
	for _, c := range []struct {
		name       string
		checker    string
		until      M
		max        int
		iterations int
		status     string
		result     string
	}{
		{"until-first-iteration", "builtin.approve@1", approved, 5, 1, "succeeded", hi},
		{"until-third-iteration", "test.verdict@1", approved, 5, 3, "succeeded", hi},
		{"max-iterations", "builtin.reject@1", approved, 4, 4, "failed", "exhausted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, capsule.Options{Commands: []worker.CommandSpec{countingVerdict(t, "test.verdict@1", 2)}})
			run := e.apply(repair(c.checker, c.until, c.max), hi)
			wantTerminal(t, e.waitFinished(), c.status, c.result)
			es := e.history(*run.RunID)
			for _, node := range []string{"fix", "check"} {
				begins := es.of(protocol.EventNodeBegin, node)
				if len(begins) != c.iterations {
					t.Fatalf("%s ran %d times, want %d:%s", node, len(begins), c.iterations, es)
				}
				for _, b := range begins {
					if b.Event.Node.Attempt != 1 {
						t.Fatalf("each iteration is a fresh visit (attempt 1):%s", es)
					}
				}
			}
		})
	}
	t.Run("no-until", func(t *testing.T) {
		e := start(t, capsule.Options{})
		run := e.apply(spec(seq("main", loop("twice", step("tick", "builtin.echo@1"), nil, 2), succeedText("done"))), hi)
		wantTerminal(t, e.waitFinished(), "succeeded", hi)
		if n := len(e.history(*run.RunID).of(protocol.EventNodeBegin, "tick")); n != 2 {
			t.Fatalf("tick ran %d times, want 2", n)
		}
	})
}

func TestMapPromotesItemResults(t *testing.T) {
	e := start(t, capsule.Options{})
	body := step("each", "builtin.echo@1", binds(ib("text", sel("item", "text"))), writes(wOut("each", "text", "results")))
	run := e.apply(spec(seq("main",
		mapOver("fan", body, sel("state", "items"), 8, promote("results")),
		M{"kind": "succeed", "name": "done", "output": tRec(req("results", tArr(tStr))), "bindings": []M{fromState("results")}},
	), "items"), `{"text":"-","items":[{"text":"x"},{"text":"y"},{"text":"z"},{"text":"w"}]}`)
	wantTerminal(t, e.waitFinished(), "succeeded", `{"results":["x","y","z","w"]}`)
	if n := len(e.history(*run.RunID).of(protocol.EventNodeBegin, "each")); n != 4 {
		t.Fatalf("%d item executions, want 4", n)
	}
}

func TestTerminals(t *testing.T) {
	e := start(t, capsule.Options{})
	run := e.apply(spec(seq("main", step("echo", "builtin.echo@1"), failWith("stop", "denied"))), hi)
	r := e.waitFinished()
	wantTerminal(t, r, "failed", "denied")
	if es := e.history(*run.RunID); es.last().Event.StopMode != "" {
		t.Fatalf("a terminal finish has no stop mode:%s", es)
	}
}

// TestAttemptsRedispatch: a command step failing its first run is
// re-dispatched as attempt 2 of the same visit and succeeds.
func TestAttemptsRedispatch(t *testing.T) {
	e := start(t, capsule.Options{Commands: []worker.CommandSpec{flakyStep(t, "test.flaky@1", 1)}})
	run := e.apply(spec(seq("main", step("work", "test.flaky@1", attempts(2)), succeedText("done"))), hi)
	wantTerminal(t, e.waitFinished(), "succeeded", hi)
	es := e.history(*run.RunID)
	begins, ends := es.of(protocol.EventNodeBegin, "work"), es.of(protocol.EventNodeEnd, "work")
	if len(begins) != 2 || begins[0].Event.Node.Attempt != 1 || begins[1].Event.Node.Attempt != 2 {
		t.Fatalf("want attempts 1 and 2:%s", es)
	}
	if len(ends) != 2 || ends[0].outcome(t).Code != "crash" || ends[1].outcome(t).Status != "verified" {
		t.Fatalf("want crash then verified:%s", es)
	}
	if string(begins[1].Event.Input) != string(begins[0].Event.Input) {
		t.Fatalf("a re-dispatch keeps its input:%s", es)
	}
}

// heldAfter reports whether the run holds: the last event is the hold
// bookmark after a failed node_end.
func heldAfter(ends int) func(events) bool {
	return func(es events) bool {
		return len(es.of(protocol.EventNodeEnd, "")) == ends && len(es) > 0 && es.last().Event.Type == protocol.EventBookmark
	}
}

// TestHoldAndRetry: an unrouted final failure holds the run (running, no
// lease); retry grants one more attempt, which is dispatched (and, with
// builtin.fail, holds again); a flaky command worker then succeeds.
func TestHoldAndRetry(t *testing.T) {
	t.Run("builtin.fail", func(t *testing.T) {
		e := start(t, capsule.Options{})
		run := e.apply(spec(seq("main", step("boom", "builtin.fail@1"), succeedText("done"))), hi)
		e.watchUntil(*run.RunID, "hold", heldAfter(1))
		r := e.get()
		if r.Status.Phase != protocol.PhaseRunning || r.Status.Operational.InFlight != 0 || r.TerminalResult != nil {
			t.Fatalf("held run: %s", mustJSON(t, r))
		}
		rr := e.retry()
		if rr.RetriedTurnID == "" || rr.RetryTurnID == "" {
			t.Fatalf("retry result %s", mustJSON(t, rr))
		}
		es := e.watchUntil(*run.RunID, "second hold", heldAfter(2))
		begins := es.of(protocol.EventNodeBegin, "boom")
		if len(begins) != 2 || begins[1].Event.Node.Attempt != 2 {
			t.Fatalf("retry must dispatch attempt 2:%s", es)
		}
		if _, err := e.stop("force"); err != nil {
			t.Fatal(err)
		}
		if r := e.waitFinished(); r.TerminalResult != nil {
			t.Fatalf("a stopped run has no terminal result: %s", mustJSON(t, r))
		}
	})
	t.Run("flaky-command", func(t *testing.T) {
		e := start(t, capsule.Options{Commands: []worker.CommandSpec{flakyStep(t, "test.flaky@1", 1)}})
		run := e.apply(spec(seq("main", step("work", "test.flaky@1"), succeedText("done"))), hi)
		e.watchUntil(*run.RunID, "hold", heldAfter(1))
		e.retry()
		wantTerminal(t, e.waitFinished(), "succeeded", hi)
	})
}

// TestErrorRouting: a guard reading the node's error control routes its
// failure (no hold); the error code picks the branch.
func TestErrorRouting(t *testing.T) {
	e := start(t, capsule.Options{})
	run := e.apply(spec(seq("main",
		step("boom", "builtin.fail@1", attempts(2)),
		choice("route", succeedText("fine"),
			when(onError("boom", "crash"), failWith("crashed", "boomCrashed")),
			when(onError("boom", "timeout", "malformed", "refusal"), failWith("other", "boomOther"))),
	)), hi)
	wantTerminal(t, e.waitFinished(), "failed", "boomCrashed")
	es := e.history(*run.RunID)
	if n := len(es.of(protocol.EventNodeBegin, "boom")); n != 2 {
		t.Fatalf("routing happens after the attempts are used up:%s", es)
	}
	if n := len(es.of(protocol.EventBookmark, "")); n != 0 {
		t.Fatalf("a routed failure does not hold:%s", es)
	}
}

// TestTimeout: a step outliving its timeoutMs ends with error timeout.
func TestTimeout(t *testing.T) {
	e := start(t, capsule.Options{})
	run := e.apply(spec(seq("main",
		sleepStep("nap", timeout(20)),
		choice("route", failWith("other", "notTimeout"), when(onError("nap", "timeout"), succeedText("timedOut"))),
	), "ms"), `{"text":"hi","ms":600000}`)
	wantTerminal(t, e.waitFinished(), "succeeded", hi)
	ends := e.history(*run.RunID).of(protocol.EventNodeEnd, "nap")
	if len(ends) != 1 || ends[0].outcome(t).Code != "timeout" || ends[0].outcome(t).Reason != "declared_failure" {
		t.Fatalf("node_end %v", ends)
	}
}

// TestSuspendGatesDispatch: suspension lets the in-flight execution finish
// but dispatches nothing new until resumed.
func TestSuspendGatesDispatch(t *testing.T) {
	g := newGate(t, "test.gate@1")
	e := start(t, capsule.Options{Commands: []worker.CommandSpec{g.spec}})
	run := e.apply(spec(seq("main",
		step("first", "test.gate@1", writes(wOut("first", "text", "text"))),
		step("second", "builtin.echo@1", writes(wOut("second", "text", "text"))),
		succeedText("done"))), hi)
	e.watchUntil(*run.RunID, "first begins", func(es events) bool { return len(es.of(protocol.EventNodeBegin, "first")) == 1 })
	e.update(true)
	g.release(t)
	es := e.watchUntil(*run.RunID, "first ends", func(es events) bool { return len(es.of(protocol.EventNodeEnd, "first")) == 1 })
	// The settlement's commit wakes the supervisor, whose reconcile meets
	// the closed gate; a dispatch could only come through the ledger,
	// which refuses it while suspended. Another commit (the resume) is
	// needed before anything moves.
	r := e.get()
	if r.Status.Phase != protocol.PhaseRunning || r.Status.Operational.DispatchState != protocol.DispatchSuspended || r.Status.Operational.InFlight != 0 {
		t.Fatalf("suspended run: %s", mustJSON(t, r))
	}
	if n := len(es.of(protocol.EventNodeBegin, "second")); n != 0 {
		t.Fatalf("dispatched while suspended:%s", es)
	}
	e.update(false)
	wantTerminal(t, e.waitFinished(), "succeeded", hi)
	es = e.history(*run.RunID)
	// Nothing was dispatched between the suspend and the resume.
	var suspendedAt, resumedAt int
	for i, ev := range es {
		if ev.Event.Type == protocol.EventPhase && ev.Event.Status.Operational != nil {
			switch ev.Event.Status.Operational.DispatchState {
			case protocol.DispatchSuspended:
				suspendedAt = i
			case protocol.DispatchActive:
				if suspendedAt > 0 {
					resumedAt = i
				}
			}
		}
	}
	for i := suspendedAt; i < resumedAt; i++ {
		if es[i].Event.Type == protocol.EventNodeBegin {
			t.Fatalf("node_begin while suspended:%s", es)
		}
	}
	if resumedAt == 0 || len(es[resumedAt:].of(protocol.EventNodeBegin, "second")) != 1 {
		t.Fatalf("second must run after the resume:%s", es)
	}
}

func TestStopDrain(t *testing.T) {
	g := newGate(t, "test.gate@1")
	e := start(t, capsule.Options{Commands: []worker.CommandSpec{g.spec}})
	run := e.apply(spec(seq("main", step("first", "test.gate@1"), step("second", "builtin.echo@1"), succeedText("done"))), hi)
	e.watchUntil(*run.RunID, "first begins", func(es events) bool { return len(es.of(protocol.EventNodeBegin, "first")) == 1 })
	sr, err := e.stop("drain")
	if err != nil {
		t.Fatal(err)
	}
	if sr.Phase != protocol.PhaseRunning || sr.Operational.DispatchState != protocol.DispatchDraining || sr.Operational.InFlight != 1 {
		t.Fatalf("drain with a lease keeps running: %s", mustJSON(t, sr))
	}
	g.release(t)
	r := e.waitFinished()
	if r.TerminalResult != nil || r.Status.Operational.StopMode != "drain" {
		t.Fatalf("drained: %s", mustJSON(t, r))
	}
	es := e.history(*run.RunID)
	if len(es.of(protocol.EventNodeEnd, "first")) != 1 || len(es.of(protocol.EventNodeBegin, "second")) != 0 || es.last().Event.StopMode != "drain" {
		t.Fatalf("in-flight finishes, nothing new starts:%s", es)
	}
}

func TestStopForce(t *testing.T) {
	g := newGate(t, "test.gate@1") // never released: the force stop kills it
	e := start(t, capsule.Options{Commands: []worker.CommandSpec{g.spec}})
	run := e.apply(spec(seq("main", step("first", "test.gate@1"), succeedText("done"))), hi)
	e.watchUntil(*run.RunID, "first begins", func(es events) bool { return len(es.of(protocol.EventNodeBegin, "first")) == 1 })
	sr, err := e.stop("force")
	if err != nil {
		t.Fatal(err)
	}
	if sr.Phase != protocol.PhaseFinished || sr.EffectiveMode != "force" {
		t.Fatalf("force finishes at once: %s", mustJSON(t, sr))
	}
	es := e.history(*run.RunID)
	if len(es.of(protocol.EventNodeEnd, "")) != 0 || es.last().Event.StopMode != "force" {
		t.Fatalf("force stop:%s", es)
	}
	if r := e.get(); r.TerminalResult != nil {
		t.Fatalf("no terminal result: %s", mustJSON(t, r))
	}
}

// TestApplyDuringRun: a changed apply supersedes a held run (which is
// finished with stop_mode force) but is refused while an execution is
// active.
func TestApplyDuringRun(t *testing.T) {
	other := spec(seq("other", step("echo", "builtin.echo@1"), succeedText("done")))
	t.Run("held-run-is-superseded", func(t *testing.T) {
		e := start(t, capsule.Options{})
		old := e.apply(spec(seq("main", step("boom", "builtin.fail@1"), succeedText("done"))), hi)
		e.watchUntil(*old.RunID, "hold", heldAfter(1))
		nw := e.apply(other, `{"text":"new"}`)
		if *nw.RunID == *old.RunID || *nw.Generation != 2 {
			t.Fatalf("apply result %s", mustJSON(t, nw))
		}
		es := e.history(*old.RunID)
		if es.last().Event.StopMode != "force" {
			t.Fatalf("superseded run:%s", es)
		}
		wantTerminal(t, e.waitFinished(), "succeeded", `{"text":"new"}`)
	})
	t.Run("active-execution-refuses", func(t *testing.T) {
		g := newGate(t, "test.gate@1")
		e := start(t, capsule.Options{Commands: []worker.CommandSpec{g.spec}})
		run := e.apply(spec(seq("main", step("first", "test.gate@1"), succeedText("done"))), hi)
		e.watchUntil(*run.RunID, "first begins", func(es events) bool { return len(es.of(protocol.EventNodeBegin, "first")) == 1 })
		_, err := e.applyErr(other, hi)
		wantAppError(t, err, protocol.InvalidPhase)
		g.release(t)
		wantTerminal(t, e.waitFinished(), "succeeded", hi)
	})
}
