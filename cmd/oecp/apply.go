package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
	"github.com/spf13/cobra"
)

// applyRun is one `oecp apply`: the graph, the input and the request.
type applyRun struct {
	*cli
	file  string
	graph json.RawMessage
	input json.RawMessage // nil when --input is absent
	dry   bool
	watch bool
}

func applyCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("apply", "apply -f GRAPH [--input JSON] [--dry-run] [--watch] [flags]",
		`Admits a graph. A changed graph starts a new run with --input as its root input
(a JSON value, or @FILE). An unchanged graph without --input is a no-op in every
phase: it says so and exits 0 (--watch then follows the current run). --dry-run
takes the same flags, changes nothing, shows the node diff and predicts the outcome:
the refusal the real apply would meet (same message, exit 1) or that it would be a
no-op (an --idempotency-key already used is not checked). --watch follows the new
run's events to its end (exit 1 if it fails, 3 if it holds on a failed step).
apply sends --if-generation only when given: without it the apply is an upsert.`,
		stdout, stderr, true, false)
	c.upsert = true
	a := &applyRun{cli: c}
	c.fs.StringVar(&a.file, "f", "", "`GRAPH` file (JSON GraphSpec; - for stdin)")
	input := c.fs.String("input", "", "root input of the new run: a `JSON` value, or @FILE")
	c.fs.BoolVar(&a.dry, "dry-run", false, "show the diff and predict the outcome; change nothing")
	c.fs.BoolVar(&a.watch, "watch", false, "follow the new run until it finishes")
	c.addTimestamps()
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 0, 0); err != nil {
			return err
		}
		if a.file == "" {
			return c.fs.usageErr("give the graph file with -f GRAPH")
		}
		var err error
		if a.graph, err = readGraph(a.file); err != nil {
			return c.usageErr("%v", err)
		}
		if flagGiven(c.fs, "input") {
			if a.input, err = parseJSONArg("--input", *input); err != nil {
				return c.usageErr("%v", err)
			}
		}
		s, err := c.open()
		if err != nil {
			return err
		}
		defer s.close()
		if c.ifRun.set {
			if _, err := c.readCAS(s.ctx, s.conn, false); err != nil {
				return c.fail(err)
			}
		}
		if a.dry {
			return a.dryRun(s)
		}
		return a.commit(s)
	})
}

// request is the apply request; a dry run carries neither input nor key.
func (a *applyRun) request() client.ApplyParams {
	p := client.ApplyParams{Graph: a.graph, DryRun: a.dry}
	if !a.dry {
		p.Input, p.IdempotencyKey = a.input, orKey(a.idemKey)
	}
	if a.ifGeneration.set {
		g := a.ifGeneration.v
		p.IfGeneration = &g
	}
	return p
}

// commit sends the apply. A phase refusal of an unchanged graph without
// --input is the no-op the help promises.
func (a *applyRun) commit(s *session) error {
	var r protocol.ApplyResult
	raw, err := s.call(protocol.MethodApply, a.request(), &r)
	if client.ErrorCode(err) == protocol.InvalidPhase && a.input == nil {
		if g, gerr := s.conn.Get(s.ctx, client.GetParams{}); gerr == nil && !graphChanged(a.graph, g.Spec) {
			return a.unchanged(s, g.Status)
		}
	}
	if err != nil {
		return a.failGraph(err, a.file, a.graph)
	}
	switch {
	case a.machine():
		a.printRaw(raw)
	case a.input == nil:
		// Only an unchanged graph is admitted without --input (a changed
		// one must carry its run's input): the server answered the current
		// run's receipt.
		fmt.Fprintf(a.stdout, "unchanged: the cluster already has this graph (run %s, generation %s, phase %s); nothing applied%s\n",
			strOr(r.RunID, "none"), intOr(r.Generation, "none"), r.Phase, dedupNote(r.Deduped))
	default:
		fmt.Fprintf(a.stdout, "applied: run %s, generation %s, phase %s%s\n", strOr(r.RunID, "none"), intOr(r.Generation, "none"), r.Phase, dedupNote(r.Deduped))
	}
	if !a.watch {
		return nil
	}
	if r.RunID == nil {
		return a.failf(exitError, "the apply started no run, so there is nothing to watch")
	}
	return a.followRun(s.ctx, s.conn, s.dial, *r.RunID, "", false)
}

// unchanged reports the no-op of an unchanged graph (and with --watch
// follows the current run).
func (a *applyRun) unchanged(s *session, st protocol.ClusterStatus) error {
	fmt.Fprintf(a.stdout, "unchanged: the cluster already has this graph (run %s, generation %s, phase %s); nothing applied\n",
		strOr(st.CurrentRunID, "none"), intOr(st.ObservedGeneration, "none"), st.Phase)
	if !a.watch || st.CurrentRunID == nil {
		return nil
	}
	return a.followRun(s.ctx, s.conn, s.dial, *st.CurrentRunID, "", false)
}

// dryRun shows the diff, then predicts the real apply from get.
func (a *applyRun) dryRun(s *session) error {
	var r protocol.ApplyResult
	raw, err := s.call(protocol.MethodApply, a.request(), &r)
	if err != nil {
		return a.failGraph(err, a.file, a.graph)
	}
	if a.machine() {
		a.printRaw(raw)
	} else if r.Diff != nil {
		fmt.Fprintf(a.stdout, "dry run (nothing changed): generation %s, run %s, phase %s\n", intOr(r.Generation, "none"), strOr(r.RunID, "none"), r.Phase)
		fmt.Fprintf(a.stdout, "  added:   %s\n  removed: %s\n  changed: %s\n", list(r.Diff.Added), list(r.Diff.Removed), list(r.Diff.Changed))
	}
	g, err := s.conn.Get(s.ctx, client.GetParams{})
	if err != nil {
		return a.fail(err)
	}
	held, err := s.heldOn(g.Status)
	if err != nil {
		return a.fail(err)
	}
	noop, refusal := predictApply(a.graph, a.input, g, held != nil)
	switch {
	case refusal != nil:
		return a.failGraph(refusal, a.file, a.graph)
	case a.machine():
	case noop:
		fmt.Fprintln(a.stdout, "  outcome: a no-op (the cluster already has this graph)")
	default:
		fmt.Fprintln(a.stdout, "  outcome: a new run")
	}
	return nil
}

// graphChanged reports whether file's graph differs from the admitted
// spec, by compiled-IR identity as the server decides (§6.2); a graph
// either side cannot compute counts as changed.
func graphChanged(file, spec json.RawMessage) bool {
	a, err1 := identityOf(file)
	b, err2 := identityOf(spec)
	return err1 != nil || err2 != nil || a != b
}

func identityOf(raw json.RawMessage) (string, error) {
	g, err := graph.Decode(raw)
	if err != nil {
		return "", err
	}
	return graph.Identity(g)
}

// Messages of the apply input rules (cluster/admission.go).
const (
	msgUnchangedInput = "unchanged apply must omit input; use resubmit to supply a new root input"
	msgChangedNeedsIn = "apply that starts a run requires input"
)

// predictApply says what a committed apply of file with input (nil:
// absent) would meet on the cluster g shows, in the server's order (input
// rules, then phase): noop for an unchanged graph (the server's receipt
// of the current run, or the CLI's own no-op), else the server's refusal,
// or neither when it would start a run. held
// says the running run holds on a failed step (the engine replaces a
// running run by a changed graph only then).
func predictApply(file, input json.RawMessage, g *protocol.GetResult, held bool) (noop bool, refusal *client.Error) {
	changed := g.Spec == nil || string(g.Spec) == "null" || graphChanged(file, g.Spec)
	schema := func(reason string) *client.Error {
		d, _ := json.Marshal(map[string]string{"reason": reason})
		return &client.Error{Code: protocol.CodeInvalidParams, Message: protocol.MsgInvalidParams, DataCode: protocol.SchemaViolation, Details: d}
	}
	switch {
	case !changed && input != nil:
		return false, schema(msgUnchangedInput)
	case changed && input == nil:
		return false, schema(msgChangedNeedsIn)
	case changed:
		if fg, err := graph.Decode(file); err == nil {
			if err := fg.InitialInput.Validate(input); err != nil {
				return false, schema(err.Error())
			}
		}
	}
	st := g.Status
	active := st.Operational != nil && st.Operational.DispatchState == protocol.DispatchActive
	switch {
	case st.Phase == protocol.PhaseEmpty:
		return false, nil
	case !changed:
		return true, nil
	case st.Phase == protocol.PhaseRunning && active && st.Operational.InFlight == 0 && held:
		return false, nil
	}
	d, _ := json.Marshal(map[string]string{"currentPhase": st.Phase})
	return false, &client.Error{Code: protocol.CodeApplication, Message: protocol.MsgInvalidPhase, DataCode: protocol.InvalidPhase, Details: d}
}
