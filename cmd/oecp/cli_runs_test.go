package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// crash2 is a step that fails on each of its 2 attempts.
const crash2 = "testdata/crash2.json"

// TestCLIHeldRunOutput: a step whose last attempt failed holds the run.
// watch prints the hold once, only after the last attempt, and exits 3;
// get prints it; --follow keeps watching past it; after stop --force, get
// says how the run ended.
func TestCLIHeldRunOutput(t *testing.T) {
	srv := startServer(t)
	r := oecp(t, srv, "apply", "-f", crash2, "--input", "null", "--watch", "--timestamps=false")
	last := "\nboom finished [attempt 2] (error: crash, declared_failure)"
	expect(t, r, exitHeld, []string{
		"\nboom finished (error: crash, declared_failure)",
		"\nboom started [attempt 2]\n",
		last,
		"\nheld: boom failed (crash, declared_failure) after 2 attempts — oecp retry | oecp stop\n",
	}, []string{"oecp apply: run run-1 is held on a failed step", "(exit 3; --follow keeps watching)"})
	if n := strings.Count(r.stdout, "held:"); n != 1 || strings.Index(r.stdout, "held:") < strings.Index(r.stdout, last) || strings.Contains(r.stderr, "attempts left") {
		t.Fatalf("the hold was said %d times (want once, after the last attempt):\n%s\n%s", n, r.stdout, r.stderr)
	}
	held := "held:        boom failed (crash, declared_failure) after 2 attempts — oecp retry | oecp stop\n"
	expect(t, oecp(t, srv, "get"), 0, []string{held}, nil)
	// A changed graph may replace a held run.
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--dry-run"), 0, []string{"outcome: a new run"}, nil)
	expect(t, oecp(t, srv, "watch"), exitHeld, []string{"held: boom failed"}, []string{"oecp watch: run run-1 is held"})

	// A retry gives one more attempt; the run holds again after it, and a
	// watch replaying the first hold from history does not stop there.
	expect(t, oecp(t, srv, "retry"), 0, []string{"retry accepted for run run-1: the failed step gets one more attempt"}, nil)
	expect(t, oecp(t, srv, "watch", "--timestamps=false"), exitHeld, []string{"boom started [attempt 3]", "after 3 attempts — oecp retry | oecp stop\n"}, nil)
	expect(t, oecp(t, srv, "get"), 0, []string{"held:        boom failed (crash, declared_failure) after 3 attempts"}, nil)

	p := startCLI(t, srv, "watch", "--follow")
	p.waitStdout("after 3 attempts")
	expect(t, oecp(t, srv, "stop", "--force"), 0, nil, nil)
	p.waitStdout("run run-1 stopped (force)")
	if code := p.interrupt(); code != 130 {
		t.Fatalf("watch --follow: exit %d, output %q", code, p.seen)
	}
	g := oecp(t, srv, "get")
	expect(t, g, 0, []string{"result:      stopped (force)\n"}, nil)
	if strings.Contains(g.stdout, "held:") {
		t.Fatalf("a stopped run is not held:\n%s", g.stdout)
	}
}

// TestCLITimestampsAndOutputFormats: watch lines start with the local
// time unless --timestamps=false; -o json|yaml|wide on get and watch; get
// shows the spec only with --spec or -o yaml (and -o json).
func TestCLITimestampsAndOutputFormats(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--input", oneInput, "--watch"), 0, nil, nil)

	// The finished run's events are all replayed: no time (the protocol
	// records none), not the time they were printed.
	stamped := regexp.MustCompile(`(?m)^(\d\d:\d\d:\d\d|--:--:--) echo started$`)
	if r := oecp(t, srv, "watch"); r.code != 0 || !strings.Contains(r.stdout, "\n--:--:-- echo started\n") {
		t.Fatalf("watch without the replayed mark on its lines: %+v", r)
	}
	r := oecp(t, srv, "watch", "--timestamps=false")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "run run-1 started (generation 1)\n") || stamped.MatchString(r.stdout) {
		t.Fatalf("watch --timestamps=false: %+v", r)
	}
	expect(t, oecp(t, srv, "watch", "-o", "wide", "--timestamps=false"), 0, []string{"\nrun-1 cursor-2 echo started\n"}, nil)
	expect(t, oecp(t, srv, "watch", "-o", "yaml"), 0, []string{"---\nsubscriptionId: sub-", "\n  type: finished\n"}, []string{"run run-1 succeeded"})

	text := oecp(t, srv, "get")
	expect(t, text, 0, []string{"phase:       finished"}, nil)
	if strings.Contains(text.stdout, "spec:") || strings.Contains(text.stdout, "cursor:") {
		t.Fatalf("get shows the spec or cursor without --spec / -o wide:\n%s", text.stdout)
	}
	expect(t, oecp(t, srv, "get", "--spec"), 0, []string{"spec:        {"}, nil)
	expect(t, oecp(t, srv, "get", "-o", "wide"), 0, []string{"cursor:      cursor-"}, nil)
	expect(t, oecp(t, srv, "get", "-o", "yaml"), 0, []string{"---\nspec:\n  profile: openengine.graph.full/v1\n", "\nstatus:\n  phase: finished\n"}, nil)
	var g struct{ Spec json.RawMessage }
	if r := oecp(t, srv, "get", "-o", "json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil || len(g.Spec) < 10 {
		t.Fatalf("get -o json: %+v", r)
	}
	expect(t, oecp(t, srv, "get", "-o", "table"), 2, nil, []string{"want json, yaml or wide"})
	expect(t, oecp(t, srv, "get", "--json", "-o", "yaml"), 2, nil, []string{"--json is -o json"})
}

// TestCLIWatchTellsItemsAndIterations: map items are numbered, loop
// iterations counted, and a step's verdict shown.
func TestCLIWatchTellsItemsAndIterations(t *testing.T) {
	srv := startServer(t)
	expect(t, oecp(t, srv, "apply", "-f", "../../examples/map-items.json", "--input", "@../../examples/map-items.input.json", "--watch"), 0,
		[]string{" echoItem[0] started\n", " echoItem[1] started\n", " echoItem[2] started\n"}, nil)
	expect(t, oecp(t, srv, "delete"), 0, nil, nil)
	expect(t, oecp(t, srv, "apply", "-f", "../../examples/repair-loop.json", "--input", "@../../examples/repair-loop.input.json", "--watch"), 0,
		[]string{" fix (iteration 1) started\n", " check (iteration 1) finished (verifier, verdict=approved)"}, nil)
}

// TestCLIWatchShowsDurations: a watch that saw a step start live shows
// how long it ran on its "finished" line.
func TestCLIWatchShowsDurations(t *testing.T) {
	srv := startServer(t)
	p := startCLI(t, srv, "watch", "--timestamps=false")
	p.waitStderr("waiting for the next run to start")
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", `{"ms":5}`), 0, nil, nil)
	p.waitStdout("nap finished (verified) after ")
	if code := p.wait(); code != 0 {
		t.Fatalf("watch: exit %d, output %q", code, p.seen)
	}
}

// TestCLIDryRunPredictsApply: apply --dry-run takes the real command's
// flags and ends as the real apply would: the same refusal (exit code and
// message), or the no-op of an unchanged graph, which is a no-op in every
// phase.
func TestCLIDryRunPredictsApply(t *testing.T) {
	srv := startServer(t)
	same := func(want string, args ...string) {
		t.Helper()
		dry := oecp(t, srv, append(append([]string{"apply"}, args...), "--dry-run", "--watch", "--idempotency-key", "dry-1")...)
		real := oecp(t, srv, append([]string{"apply"}, args...)...)
		if dry.code != real.code || dry.stderr != real.stderr || !strings.Contains(real.stderr, want) {
			t.Errorf("apply %v: dry run exit %d %q, real exit %d %q; want the same, with %q", args, dry.code, dry.stderr, real.code, real.stderr, want)
		}
	}
	same("oecp apply refused: apply that starts a run requires input", "-f", oneStep)
	expect(t, oecp(t, srv, "apply", "-f", oneStep, "--dry-run"), 1, []string{"dry run (nothing changed)", "added:   done, echo, main"}, nil)
	same("SCHEMA_VIOLATION: $", "-f", sleepy, "--input", `{"ms":"x"}`)
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	same("oecp apply refused: the cluster's run is still running", "-f", oneStep, "--input", oneInput)
	same("unchanged apply must omit input", "-f", sleepy, "--input", sleepLong)
	same("GENERATION_CONFLICT", "-f", oneStep, "--input", oneInput, "--if-generation", "5")

	// An unchanged graph without --input is a no-op in every phase.
	for _, step := range [][]string{nil, {"update", "--suspend"}, {"stop", "--force"}} {
		if step != nil {
			expect(t, oecp(t, srv, step...), 0, nil, nil)
		}
		expect(t, oecp(t, srv, "apply", "-f", sleepy, "--dry-run"), 0, []string{"outcome: a no-op"}, nil)
		real := oecp(t, srv, "apply", "-f", sleepy)
		if real.code != 0 || !strings.Contains(real.stdout, "unchanged: the cluster already has this graph") || strings.Contains(real.stdout, "applied:") {
			t.Errorf("after %v, apply of the unchanged graph: %+v", step, real)
		}
	}
	same("oecp apply refused: the cluster's run has finished", "-f", oneStep, "--input", oneInput)
}
