package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
	"github.com/spf13/cobra"
)

func planCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("plan", "plan -f GRAPH [flags]", "Verifies a graph on the server without admitting it and prints its diagnostics\nand structural bounds. Exits 1 when the graph is rejected. A native graph (agent and git\ndelivery nodes, for 'oecp run submit') is checked here instead, as run/submit admits it.", stdout, stderr, false, false)
	file := c.fs.String("f", "", "`GRAPH` file (JSON GraphSpec; - for stdin)")
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 0, 0); err != nil {
			return err
		}
		if *file == "" {
			return c.fs.usageErr("give the graph file with -f GRAPH")
		}
		graph, err := readGraph(*file)
		if err != nil {
			return c.usageErr("%v", err)
		}
		if g, ok := nativeGraph(graph); ok {
			return c.planNative(g)
		}
		s, err := c.open()
		if err != nil {
			return err
		}
		defer s.close()
		var r protocol.PlanResult
		raw, err := s.call(protocol.MethodPlan, map[string]json.RawMessage{"graph": graph}, &r)
		if err != nil {
			return c.failGraph(err, *file, graph)
		}
		if c.machine() {
			c.printRaw(raw)
		} else {
			var diags []json.RawMessage
			_ = json.Unmarshal(r.Diagnostics, &diags)
			if r.OK {
				fmt.Fprintln(stdout, "graph is valid")
			} else {
				fmt.Fprintln(stdout, "graph is invalid")
			}
			for _, d := range diags {
				fmt.Fprintf(stdout, "  %s\n", formatDiagnostic(d))
			}
			if len(r.Bounds) > 0 {
				printBounds(stdout, r.Bounds)
			}
		}
		if !r.OK {
			if !c.machine() {
				return c.failf(exitError, "the graph was rejected; fix the diagnostics above and plan again.")
			}
			return exitWith(exitError)
		}
		return nil
	})
}

func printBounds(w io.Writer, raw json.RawMessage) {
	var b struct {
		Termination struct {
			Kind          string     `json:"kind"`
			Order         []string   `json:"order"`
			Ranking       [][]string `json:"ranking"`
			MaxIterations int64      `json:"maxIterations"`
		} `json:"termination"`
		MaxNodeExecutions int64            `json:"maxNodeExecutions"`
		PeakConcurrency   int64            `json:"peakConcurrency"`
		AttemptsPerNode   map[string]int64 `json:"attemptsPerNode"`
	}
	if json.Unmarshal(raw, &b) != nil {
		fmt.Fprintf(w, "bounds: %s\n", raw)
		return
	}
	fmt.Fprintln(w, "bounds:")
	switch b.Termination.Kind {
	case "acyclic":
		fmt.Fprintf(w, "  termination:         acyclic (order: %s)\n", strings.Join(b.Termination.Order, ", "))
	case "bounded":
		fmt.Fprintf(w, "  termination:         bounded loops (at most %d iterations)\n", b.Termination.MaxIterations)
	default:
		fmt.Fprintf(w, "  termination:         %s\n", b.Termination.Kind)
	}
	fmt.Fprintf(w, "  max node executions: %d\n", b.MaxNodeExecutions)
	fmt.Fprintf(w, "  peak concurrency:    %d\n", b.PeakConcurrency)
	names := make([]string, 0, len(b.AttemptsPerNode))
	for n := range b.AttemptsPerNode {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  attempts of %-8s %d\n", n+":", b.AttemptsPerNode[n])
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

func getCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("get", "get [--spec] [-o json|yaml|wide] [flags]", `Shows the cluster: phase, generation, current run, operational status, the failed
step a run is held on, and once the run has ended, its result (or how it was stopped).
-o json (--json) and -o yaml print the whole get result, the admitted graph included;
-o wide adds the cursor; --spec adds the admitted graph to the text.`, stdout, stderr, false, false)
	c.addOutput()
	showSpec := c.fs.Bool("spec", false, "also print the admitted graph")
	return c.fs.run(func(args []string) error {
		s, err := c.start(args)
		if err != nil {
			return err
		}
		defer s.close()
		var g protocol.GetResult
		if done, err := s.result(protocol.MethodGet, struct{}{}, &g); done {
			return err
		}
		held, err := s.heldOn(g.Status)
		if err != nil {
			return c.fail(err)
		}
		printGet(c, g, held, *showSpec)
		return nil
	})
}

// heldOn is the failed step a running run holds on (nil when it does not
// hold): with nothing in flight, it replays the run's events (see
// runTracker).
func (s *session) heldOn(st protocol.ClusterStatus) (*failure, error) {
	if st.Phase != protocol.PhaseRunning || st.Operational == nil || st.Operational.InFlight > 0 {
		return nil, nil
	}
	t := newRunTracker()
	_, err := replayRun(s.ctx, s.conn, func(ev client.WatchEvent) { t.observe(ev.Event) })
	return t.held, err
}

// printGet prints get's text output.
func printGet(c *cli, g protocol.GetResult, held *failure, showSpec bool) {
	w := c.stdout
	st := g.Status
	fmt.Fprintf(w, "phase:       %s\n", st.Phase)
	fmt.Fprintf(w, "generation:  %s\n", intOr(st.ObservedGeneration, "none"))
	fmt.Fprintf(w, "run:         %s\n", strOr(st.CurrentRunID, "none"))
	if c.output == "wide" {
		fmt.Fprintf(w, "cursor:      %s\n", strOr(st.AtCursor, "none"))
	}
	if op := st.Operational; op != nil {
		stopMode := op.StopMode
		if stopMode == "" {
			stopMode = "-"
		}
		fmt.Fprintf(w, "dispatch:    %s (in flight: %d, stop mode: %s)\n", op.DispatchState, op.InFlight, stopMode)
		fmt.Fprintf(w, "log level:   %s\n", op.LogLevel)
		fmt.Fprintf(w, "labels:      %s\n", formatLabels(op.Labels))
	}
	if held != nil {
		fmt.Fprintf(w, "%-12s %s\n", "held:", strings.TrimPrefix(held.heldLine(), "held: "))
	}
	if r := howEnded(g); r != "" {
		fmt.Fprintf(w, "result:      %s\n", r)
	}
	if showSpec && len(g.Spec) > 0 && string(g.Spec) != "null" {
		fmt.Fprintf(w, "spec:        %s\n", g.Spec)
	}
}

// howEnded says how the cluster's run ended: its terminal result, else the
// stop that ended it ("" while it runs).
func howEnded(g protocol.GetResult) string {
	if tr := g.TerminalResult; tr != nil {
		switch tr.Status {
		case "succeeded":
			out := "null"
			if tr.Output != nil {
				out = string(*tr.Output)
			}
			return "succeeded, output " + out
		case "failed":
			return "failed: " + tr.Reason
		}
		return tr.Status
	}
	if op := g.Status.Operational; g.Status.Phase == protocol.PhaseFinished && op != nil && op.StopMode != "" {
		return "stopped (" + op.StopMode + ")"
	}
	return ""
}

// labelEdits parses --label k=v (set) and --label k- (remove).
type labelEdits struct {
	set    map[string]string
	remove []string
}

func (l *labelEdits) String() string { return "" }
func (l *labelEdits) Type() string   { return "value" }

func (l *labelEdits) Set(v string) error {
	if k, val, ok := strings.Cut(v, "="); ok {
		if k == "" || val == "" {
			return fmt.Errorf("want key=value (both non-empty), got %q", v)
		}
		if l.set == nil {
			l.set = map[string]string{}
		}
		l.set[k] = val
		return nil
	}
	if k, ok := strings.CutSuffix(v, "-"); ok && k != "" {
		l.remove = append(l.remove, k)
		return nil
	}
	return fmt.Errorf("want key=value to set a label or key- to remove it, got %q", v)
}

func updateCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("update", "update [--label k=v]… [--label k-]… [--replace-labels] [--log-level L] [--suspend | --resume] [flags]",
		`Changes the current run's operational settings. Labels merge into the current ones
(read with get first, since the wire replaces the whole map): k=v sets, k- removes.
--replace-labels sends exactly the given labels instead (none: clear them all).`,
		stdout, stderr, true, false)
	var labels labelEdits
	c.fs.Var(&labels, "label", "set a label (`k=v`) or remove one (k-); repeatable")
	replace := c.fs.Bool("replace-labels", false, "replace all labels with the given ones instead of merging")
	logLevel := c.fs.String("log-level", "", "log `LEVEL`: trace, debug, info, warn or error")
	suspend := c.fs.Bool("suspend", false, "stop dispatching new steps (running ones continue)")
	resume := c.fs.Bool("resume", false, "resume dispatching")
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 0, 0); err != nil {
			return err
		}
		if *suspend && *resume {
			return c.fs.usageErr("--suspend and --resume exclude each other")
		}
		if *replace && len(labels.remove) > 0 {
			return c.fs.usageErr("--replace-labels takes key=value labels only")
		}
		if *logLevel != "" && !isLogLevel(*logLevel) {
			return c.fs.usageErr("--log-level %q: want trace, debug, info, warn or error", *logLevel)
		}
		labelsChange := *replace || labels.set != nil || len(labels.remove) > 0
		if !labelsChange && *logLevel == "" && !*suspend && !*resume {
			return c.fs.usageErr("nothing to update: give --label, --replace-labels, --log-level, --suspend or --resume")
		}
		mergeNeeded := labelsChange && !*replace
		s, st, err := c.openCAS(mergeNeeded)
		if err != nil {
			return err
		}
		defer s.close()
		p := client.UpdateParams{LogLevel: *logLevel, IfGeneration: st.Generation, IdempotencyKey: c.idemKey}
		if labelsChange {
			p.Labels = map[string]string{}
			if mergeNeeded {
				maps.Copy(p.Labels, st.Labels)
			}
			for k, v := range labels.set {
				p.Labels[k] = v
			}
			for _, k := range labels.remove {
				delete(p.Labels, k)
			}
		}
		if *suspend || *resume {
			s := *suspend
			p.Suspended = &s
		}
		if p.IdempotencyKey == "" {
			p.IdempotencyKey = client.NewIdempotencyKey()
		}
		var r protocol.UpdateResult
		if done, err := s.result(protocol.MethodUpdate, p, &r); done {
			return err
		}
		fmt.Fprintf(stdout, "updated run %s: dispatch %s, log level %s, labels %s%s\n", r.RunID, r.Operational.DispatchState, r.Operational.LogLevel, formatLabels(r.Operational.Labels), dedupNote(r.Deduped))
		return nil
	})
}

func isLogLevel(l string) bool {
	for _, x := range protocol.LogLevels {
		if x == l {
			return true
		}
	}
	return false
}

func stopCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("stop", "stop [--force] [flags]", "Stops the current run. By default it drains: no new steps start and the run\nfinishes when running ones settle. --force cancels running steps at once.", stdout, stderr, true, false)
	force := c.fs.Bool("force", false, "cancel running steps instead of draining")
	var r protocol.StopResult
	return c.fs.run(func(args []string) error {
		if done, err := c.mutate(args, protocol.MethodStop, func(st casState) any {
			mode := "drain"
			if *force {
				mode = "force"
			}
			return client.StopParams{Mode: mode, IfGeneration: st.Generation, IdempotencyKey: orKey(c.idemKey)}
		}, &r); done {
			return err
		}
		fmt.Fprintf(stdout, "stop (%s) accepted for run %s: phase %s, dispatch %s%s\n", r.EffectiveMode, r.RunID, r.Phase, r.Operational.DispatchState, dedupNote(r.Deduped))
		if r.Phase != protocol.PhaseFinished {
			fmt.Fprintln(stdout, "the run finishes when its running steps settle; follow it with `oecp watch`")
		}
		return nil
	})
}

func orKey(k string) string {
	if k == "" {
		return client.NewIdempotencyKey()
	}
	return k
}

func retryCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("retry", "retry [flags]", "Gives the current run's held step (its last attempt failed) one more attempt.", stdout, stderr, true, false)
	var r protocol.RetryResult
	return c.fs.run(func(args []string) error {
		if done, err := c.mutate(args, protocol.MethodRetry, func(st casState) any {
			return client.RetryParams{IfGeneration: st.Generation, IdempotencyKey: orKey(c.idemKey)}
		}, &r); done {
			return err
		}
		fmt.Fprintf(stdout, "retry accepted for run %s: the failed step gets one more attempt; `oecp watch` follows it%s\n", r.RunID, dedupNote(r.Deduped))
		return nil
	})
}

func resubmitCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("resubmit", "resubmit [--input JSON] [flags]", "Starts a new run of the finished graph, with the prior run's input or --input.", stdout, stderr, true, true)
	input := c.fs.String("input", "", "replacement root input: a `JSON` value, or @FILE (default: the prior run's input)")
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 0, 0); err != nil {
			return err
		}
		var repl json.RawMessage
		if flagGiven(c.fs, "input") {
			var err error
			if repl, err = parseJSONArg("--input", *input); err != nil {
				return c.usageErr("%v", err)
			}
		}
		s, st, err := c.openCAS(false)
		if err != nil {
			return err
		}
		defer s.close()
		if st.RunID == "" {
			return c.failf(exitError, "there is no run to resubmit (the cluster is %s); start one with `oecp apply`", orPhase(st.Phase))
		}
		p := client.ResubmitParams{IfGeneration: st.Generation, IfRunID: st.RunID, IdempotencyKey: orKey(c.idemKey), ReplacementInput: repl}
		var r protocol.ResubmitResult
		if done, err := s.result(protocol.MethodResubmit, p, &r); done {
			return err
		}
		fmt.Fprintf(stdout, "resubmitted: run %s replaces %s (generation %d, phase %s)%s\n", r.RunID, r.PriorRunID, r.Generation, r.Phase, dedupNote(r.Deduped))
		return nil
	})
}

func orPhase(p string) string {
	if p == "" {
		return "in an unknown phase"
	}
	return p
}

func deleteCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("delete", "delete [flags]", "Deletes the finished cluster: the graph, the generation and the run history.", stdout, stderr, true, true)
	var r protocol.DeleteResult
	return c.fs.run(func(args []string) error {
		if done, err := c.mutate(args, protocol.MethodDelete, func(st casState) any {
			return client.DeleteParams{IfGeneration: st.Generation, IfRunID: st.RunID, IdempotencyKey: orKey(c.idemKey)}
		}, &r); done {
			return err
		}
		switch {
		case r.Deleted:
			fmt.Fprintf(stdout, "deleted: the cluster is now %s%s\n", r.Phase, dedupNote(r.Deduped))
		case r.Phase == protocol.PhaseDeleting:
			fmt.Fprintf(stdout, "delete pending: run %s is being cleaned up (phase deleting)%s\n", strOr(r.RunID, "?"), dedupNote(r.Deduped))
		default:
			fmt.Fprintf(stdout, "nothing to delete: the cluster is %s%s\n", r.Phase, dedupNote(r.Deduped))
		}
		return nil
	})
}
