package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine"
	"github.com/oecp/oecp/protocol"
)

func watchCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("watch", "watch [--run ID] [--from CURSOR] [--follow] [-o json|yaml|wide] [flags]",
		`Prints a run's events as they arrive (the current run by default, or the next one
to start if there is none), replaying its history after --from, and ends with the
run's result: exit 0 if it succeeded, 1 if it failed or was stopped. A step whose last
attempt failed holds the run until `+"`oecp retry` or `oecp stop`"+`: watch prints the hold
and exits 3 (--follow keeps watching). The watch survives dropped connections,
resuming after the last event it printed. Each line starts with the local time the
event arrived, or --:--:-- for one replayed from the run's history (the protocol records
no times); "finished" lines show how long a step ran (at least since the watch started,
for one that began before). A map item's end is numbered when it is known which item
ended, else counted: echoItem[?] (end 2 of 3).
-o json (--json) prints one event notification per line, -o yaml one document each,
-o wide adds the run and cursor to each line.`,
		stdout, stderr, false, false)
	c.addOutput()
	c.addTimestamps()
	run := c.fs.String("run", "", "run `ID` to watch (default: the current run)")
	from := c.fs.String("from", "", "print only events after this `CURSOR` (unknown to the server: NOT_FOUND)")
	forever := c.fs.Bool("follow", false, "keep watching after the run finishes or holds (until interrupted)")
	return c.fs.run(func(args []string) error {
		s, err := c.start(args)
		if err != nil {
			return err
		}
		defer s.close()
		return c.followRun(s.ctx, s.conn, s.dial, *run, *from, *forever)
	})
}

// exitHeld is the exit status of watch (and apply --watch) when the run
// holds on a failed step.
const exitHeld = 3

// followRun prints a run's events until it finishes (or holds, unless
// forever) and reports how it ended. The exit status reflects the run's
// result.
func (c *cli) followRun(ctx context.Context, conn *client.Conn, dial client.Dialer, runID, from string, forever bool) error {
	w, err := client.FollowWatch(ctx, client.FollowOptions{
		RunID: runID, FromCursor: from, Forever: forever, Conn: conn, Dial: dial,
		OnReconnect: c.resumeNotice("the watch"),
	})
	if err != nil {
		if from != "" && client.ErrorCode(err) == protocol.NotFound && runExists(ctx, conn, runID) {
			return c.failf(exitError, "the run has no cursor %q (NOT_FOUND)", from).
				hint("Give a cursor of this run's events (`oecp watch -o wide` shows them), or leave --from out.")
		}
		return c.fail(err)
	}
	defer w.Close()
	if w.RunID() == "" {
		fmt.Fprintf(c.stderr, "oecp %s: no run yet; waiting for the next run to start (Ctrl-C to stop)…\n", c.name)
	}
	p := c.newEventPrinter(w.HistoryTail())
	var end error
	sawEnd := false
	for ev := range w.Events() {
		if p.print(ev) {
			if c.machine() {
				fmt.Fprintln(c.stderr, p.t.held.heldLine())
			}
			if !forever {
				return &exitErr{code: exitHeld, text: fmt.Sprintf("oecp %s: run %s is held on a failed step: `oecp retry` gives it one more attempt, `oecp stop` ends the run (exit 3; --follow keeps watching)\n", c.name, ev.RunID)}
			}
		}
		if ev.Event.Type == protocol.EventFinished {
			sawEnd = true
			end = c.reportEnd(ctx, conn, dial, ev)
		}
	}
	if err := w.Err(); err != nil {
		return c.fail(err)
	}
	if !sawEnd && ctx.Err() == nil {
		return c.failf(exitError, "the watch ended before the run finished")
	}
	if !sawEnd || forever {
		return nil // interrupted while following
	}
	return end
}

// runExists reports whether the cluster's current run is runID ("": any
// current run), as get tells.
func runExists(ctx context.Context, conn *client.Conn, runID string) bool {
	g, err := conn.Get(ctx, client.GetParams{})
	if err != nil || g.Status.CurrentRunID == nil {
		return false
	}
	return runID == "" || runID == *g.Status.CurrentRunID
}

// resumeNotice is a follower's OnReconnect: it says on stderr that what
// (the watch, the stream) was interrupted and resumes after a cursor, once
// per cursor however many dials the resumption takes.
func (c *cli) resumeNotice(what string) func(cause error, after string) {
	said, saidOnce := "", false
	return func(cause error, after string) {
		if saidOnce && after == said {
			return
		}
		said, saidOnce = after, true
		if after == "" {
			after = "the start"
		}
		fmt.Fprintf(c.stderr, "oecp %s: %s was interrupted (%v); resuming after %s…\n", c.name, what, cause, after)
	}
}

// reportEnd prints how the run of a finished event ended and returns nil
// when it succeeded: the finished event says whether a stop ended it; the
// result comes from get's terminalResult.
func (c *cli) reportEnd(ctx context.Context, conn *client.Conn, dial client.Dialer, ev client.WatchEvent) error {
	out := c.stdout
	if c.machine() {
		out = c.stderr
	}
	if conn.Err() != nil {
		var err error
		if conn, err = dial(ctx); err != nil {
			return c.fail(err)
		}
		defer conn.Close()
	}
	g, err := conn.Get(ctx, client.GetParams{})
	if err != nil {
		return c.fail(err)
	}
	current := g.Status.CurrentRunID != nil && *g.Status.CurrentRunID == ev.RunID
	if tr := g.TerminalResult; tr != nil && current {
		switch tr.Status {
		case "succeeded":
			fmt.Fprintf(out, "run %s succeeded\n", ev.RunID)
			if tr.Output != nil && !tr.Output.IsNull() && !c.machine() {
				fmt.Fprintf(out, "output: %s\n", *tr.Output)
			}
			return nil
		case "failed":
			fmt.Fprintf(out, "run %s failed: %s\n", ev.RunID, tr.Reason)
			return exitWith(exitError)
		}
	}
	mode := ev.Event.StopMode
	if mode == "" && ev.Event.FinalStatus != nil && ev.Event.FinalStatus.Operational != nil {
		mode = ev.Event.FinalStatus.Operational.StopMode
	}
	if mode != "" {
		fmt.Fprintf(out, "run %s stopped (%s)\n", ev.RunID, mode)
		return exitWith(exitError)
	}
	if !current {
		fmt.Fprintf(out, "run %s finished (it is no longer the current run, so its result is not available)\n", ev.RunID)
		return nil
	}
	fmt.Fprintf(out, "run %s finished (the server reported no result)\n", ev.RunID)
	return nil
}

func logsCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("logs", "logs [--timestamps=false] [flags]", "Streams the cluster's log records as they are written (no history), until\ninterrupted, each after the local time it arrived. --json prints one notification\nobject per line.", stdout, stderr, false, false)
	c.addTimestamps()
	return c.fs.run(func(args []string) error {
		s, err := c.start(args)
		if err != nil {
			return err
		}
		defer s.close()
		sub, err := s.conn.Logs(s.ctx)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(stderr, "oecp logs: following the cluster's log records (Ctrl-C to stop)")
		return pump(s, sub, "oecp logs", func(ev client.LogEvent) bool {
			if c.machine() {
				c.printRaw(ev.Raw)
			} else {
				c.streamLine(stdout, fmt.Sprintf("%-5s %s: %s", ev.Record.Level, ev.Record.Target, ev.Record.Message))
			}
			return false
		})
	})
}

// pump hands each event of a live stream to show until show says the
// stream is done, the stream ends (see streamEnded) or the command is
// interrupted. It closes sub.
func pump[E any](s *session, sub *client.Subscription[E], again string, show func(E) (done bool)) error {
	defer sub.Close()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return s.streamEnded(sub.Err(), again)
			}
			if show(ev) {
				return nil
			}
		case <-s.ctx.Done():
			return nil
		}
	}
}

// streamEnded reports the end of a live stream.
func (c *cli) streamEnded(err error, again string) error {
	var ce *client.ClosedError
	switch {
	case err == nil, client.Done(err):
		return nil
	case errors.As(err, &ce):
		return c.failf(exitError, "the server closed the stream (%s): this client fell behind; run `%s` again", ce.Reason, again)
	}
	return c.fail(err)
}

func attachCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("attach", "attach (EXECUTION | --node NAME [--attempt N]) [flags]",
		`Streams the live output of one execution of the current run until it settles.
--node finds the execution of that node (its latest attempt unless --attempt)
in the current run's events.`,
		stdout, stderr, false, false)
	node := c.fs.String("node", "", "`NAME` of the node whose execution to attach to")
	attempt := c.fs.Int64("attempt", 0, "attempt `N` of --node (default: the latest)")
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 0, 1); err != nil {
			return err
		}
		if (len(c.args) == 1) == (*node != "") {
			return c.fs.usageErr("give either an EXECUTION ref or --node NAME")
		}
		if *attempt != 0 && *node == "" {
			return c.fs.usageErr("--attempt goes with --node")
		}
		if *attempt < 0 {
			return c.fs.usageErr("--attempt must be 1 or more")
		}
		s, err := c.open()
		if err != nil {
			return err
		}
		defer s.close()
		execution := ""
		if len(c.args) == 1 {
			execution = c.args[0]
		} else {
			var err error
			if execution, err = resolveExecution(s.ctx, s.conn, *node, *attempt); err != nil {
				if client.ErrorCode(err) != "" {
					return c.fail(err)
				}
				return c.failf(exitError, "%v", err).hint("Pass the execution ref directly: oecp attach EXECUTION")
			}
		}
		sub, err := s.conn.AgentAttach(s.ctx, execution)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(stderr, "oecp attach: attached to execution %s (Ctrl-C to detach)\n", execution)
		return pump(s, sub, "oecp attach "+execution, func(ev client.AttachEvent) bool {
			return c.showAttach(ev.Event, ev.Raw)
		})
	})
}

// showAttach prints one attach event (raw is its notification) and
// reports whether the execution has settled.
func (c *cli) showAttach(ev protocol.AttachEvent, raw []byte) (settled bool) {
	if c.machine() {
		c.printRaw(raw)
		return ev.Type == "settled"
	}
	switch ev.Type {
	case "output":
		if ev.Text != nil {
			fmt.Fprintln(c.stdout, *ev.Text)
		}
	case "working":
		fmt.Fprintln(c.stderr, "[working]")
	case "settled":
		fmt.Fprintln(c.stderr, "[settled]")
		return true
	}
	return false
}

// resolveExecution finds the ExecutionRef of a node's execution in the
// current run by replaying the run's watch history up to its tail.
// The engine names the k-th dispatch of a node in a run
// "<runId>/<node>/<k>" (engine.ExecutionRef), so the reference follows
// from counting node_begin events; the latest matching one wins.
func resolveExecution(ctx context.Context, conn *client.Conn, node string, attempt int64) (string, error) {
	var best string
	counts := map[string]int{}
	runID, err := replayRun(ctx, conn, func(ev client.WatchEvent) {
		if ev.Event.Type == protocol.EventNodeBegin && ev.Event.Node != nil {
			n := ev.Event.Node.Node
			counts[n]++
			if n == node && (attempt == 0 || ev.Event.Node.Attempt == attempt) {
				best = engine.ExecutionRef(ev.RunID, n, counts[n])
			}
		}
	})
	switch {
	case err != nil:
		return "", err
	case runID == "":
		return "", fmt.Errorf("there is no current run, so node %q has no execution", node)
	case best == "":
		which := "any attempt"
		if attempt > 0 {
			which = "attempt " + strconv.FormatInt(attempt, 10)
		}
		return "", fmt.Errorf("no execution of node %q (%s) found in run %s", node, which, runID)
	}
	return best, nil
}
