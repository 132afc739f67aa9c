package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/client"
	"github.com/spf13/cobra"
)

// logsQuiet is how long `oecp run logs` without --follow waits for more
// history of an unfinished run once the records stop coming: the protocol
// marks no end of history.
const logsQuiet = time.Second

func runWatchCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run watch", "run watch ID [--from CURSOR] [-o json|yaml|wide] [flags]",
		`Prints a run's status as it changes (executions starting and ending, its phase),
replaying its history after --from, and an agent CLI retrying its provider as it
happens; it ends with the run's result and, when a git delivery ran, the branch and
the pull request it made: exit 0 if it succeeded, 1 if it failed. The watch survives
dropped connections, resuming after the last event it printed. Each line starts
with the local time the event arrived, or --:--:-- for one replayed from the run's
history (the protocol records no times).
-o json (--json) prints one event notification per line, -o yaml one document each,
-o wide adds the cursor to each line.`,
		stdout, stderr, false, false)
	c.addOutput()
	c.addTimestamps()
	from := c.fs.String("from", "", "print only what follows this `CURSOR`")
	c.fs.cmd.ValidArgsFunction = c.completeRunIDs(1)
	return c.fs.run(func(args []string) error {
		s, err := c.startRun(args, 1)
		if err != nil {
			return err
		}
		defer s.close()
		return c.watchRun(s, c.args[0], *from)
	})
}

// watchRun prints a run's watch events until the run finishes and returns
// nil when it succeeded, exit 1 when it failed.
func (c *cli) watchRun(s *session, runID, from string) error {
	stopNotices := func() {}
	var n *notices
	if st, err := s.conn.RunStatus(s.ctx, runID); err == nil {
		c.historyEnd, _ = cursorSeq(st.AtCursor)
		if !c.machine() {
			n = newNotices(c, runID)
			if st.Status.Phase != "finished" {
				stopNotices = n.follow(s, st.AtCursor)
			}
		}
	}
	f, err := client.FollowRunWatch(s.ctx, c.followOptions(s, runID, from))
	if err != nil {
		stopNotices()
		return c.fail(err)
	}
	var receipt *capsule.Receipt
	p := &runPrinter{c: c, ended: func(execution string) string {
		end := executionEnd(s.ctx, s.conn, runID, execution)
		if end.receipt != nil {
			receipt = end.receipt
		}
		if n != nil {
			n.ended(end.notices)
		}
		return end.how
	}}
	var last *client.RunWatchEvent
	err = followStream(c, f, func(ev client.RunWatchEvent) bool {
		p.print(ev)
		last = &ev
		return ev.Status.Phase == "finished"
	})
	stopNotices()
	if err == nil && last != nil && last.Status.Phase == "finished" && receipt == nil && (c.machine() || from != "") {
		// The printer did not read every execution's end.
		receipt, _ = runReceipt(s.ctx, s.conn, &client.RunStatusResult{RunID: runID, AtCursor: last.Cursor, Status: last.Status})
	}
	c.delivered = receipt
	switch {
	case err != nil:
		return err
	case s.ctx.Err() != nil:
		c.detached(runID, "oecp run watch "+runID)
		return nil // interrupted: run exits 130
	case last == nil || last.Status.Phase != "finished" || last.Status.TerminalResult == nil:
		return c.failf(exitError, "the watch ended before run %s finished", runID)
	}
	return c.reportRunEnd(runID, last.Status.TerminalResult)
}

// followOptions follow a run's stream on the session's connection,
// resuming on a new one (saying so on stderr) when it drops.
func (c *cli) followOptions(s *session, runID, from string) client.FollowOptions {
	return client.FollowOptions{RunID: runID, FromCursor: from, Conn: s.conn, Dial: s.dial,
		OnReconnect: c.resumeNotice("the stream")}
}

// followStream hands each event of a followed run stream to show until show
// says it is done, the stream ends or the command is interrupted.
func followStream[E any](c *cli, f *client.RunFollower[E], show func(E) (done bool)) error {
	defer f.Close()
	for ev := range f.Events() {
		if show(ev) {
			return nil
		}
	}
	if err := f.Err(); err != nil {
		return c.fail(err)
	}
	return nil
}

// runPrinter renders run/watch events: a header with the run's title,
// source and size, then each execution that ends or starts and each new
// phase, one line each (see line). Every event is a whole status, so the
// printer compares it with the previous one.
type runPrinter struct {
	c      *cli
	header bool
	phase  string
	active []client.RunExecution
	// ended says how an execution ended ("" when that is not known).
	ended func(execution string) string
}

// line writes one line of text output: with -o wide the cursor, then s
// (see streamLine).
func (p *runPrinter) line(ev client.RunWatchEvent, s string) {
	if p.c.output == "wide" {
		s = ev.Cursor + " " + s
	}
	p.c.stampedLine(p.c.stdout, s, p.c.replayed(ev.Cursor))
}

// replayed reports whether cursor is in the run's history as it was when
// the command started (its line is replayed, not live).
func (c *cli) replayed(cursor string) bool {
	seq, ok := cursorSeq(cursor)
	return ok && seq <= c.historyEnd
}

func (p *runPrinter) print(ev client.RunWatchEvent) {
	if p.c.machine() {
		p.c.printRaw(ev.Raw)
		return
	}
	if !p.header {
		p.line(ev, fmt.Sprintf("run %s: %q, source %s, size %s", ev.RunID, ev.Title, formatSource(ev.Source), ev.Size))
		p.header = true
	}
	now := ev.Status.ActiveExecutions
	for _, x := range without(p.active, now) {
		how := ""
		if p.ended != nil {
			if h := p.ended(x.Execution); h != "" {
				how = ": " + h
			}
		}
		if how == "" && (p.phase == "stopping" || ev.Status.Phase == "stopping") {
			// A forced run's executions end as refusals, with no end
			// record of their own.
			how = ": cancelled (a force stop)"
		}
		p.line(ev, x.Node+" ended (execution "+x.Execution+")"+how)
	}
	if ev.Status.Phase != p.phase {
		note := ""
		if ev.Status.Phase == "stopping" {
			note = " (force requested)"
		}
		p.line(ev, "phase "+ev.Status.Phase+note)
		p.phase = ev.Status.Phase
	}
	for _, x := range without(now, p.active) {
		p.line(ev, x.Node+" started (execution "+x.Execution+")")
	}
	p.active = now
}

// without is the executions of a that are not in b, in a's order.
func without(a, b []client.RunExecution) []client.RunExecution {
	var out []client.RunExecution
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func runLogsCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run logs", "run logs ID [--execution EXECUTION] [--from CURSOR] [--follow] [-o json|yaml|wide] [flags]",
		`Prints a run's durable log records (one execution's with --execution), after --from,
then exits. The history of a finished run is all of its records; that of an
unfinished run ends at the run's cursor when the command started (or after a second
without records, since the stream marks no end of history). --follow keeps printing
records as they are written until the run finishes (or Ctrl-C). Each line starts
with the local time it arrived, or --:--:-- for one replayed from the run's history
(the protocol records no times). -o json (--json) prints one log notification per line,
-o yaml one document each, -o wide adds the cursor to each line.`,
		stdout, stderr, false, false)
	follow := c.fs.Bool("follow", false, "keep printing new records until the run finishes")
	execution := c.fs.String("execution", "", "only the records of this `EXECUTION` (a ref from 'oecp run status', or a node name: its latest execution)")
	from := c.fs.String("from", "", "print only records after this `CURSOR`")
	c.addOutput()
	c.addTimestamps()
	c.fs.cmd.ValidArgsFunction = c.completeRunIDs(1)
	_ = c.fs.cmd.RegisterFlagCompletionFunc("execution", c.completeExecution)
	return c.fs.run(func(args []string) error {
		s, err := c.startRun(args, 1)
		if err != nil {
			return err
		}
		defer s.close()
		runID := c.args[0]
		var end uint64 // the last cursor of the history; 0: up to the stream's end
		st, err := s.conn.RunStatus(s.ctx, runID)
		if err != nil {
			return c.fail(err)
		}
		c.historyEnd, _ = cursorSeq(st.AtCursor)
		if !*follow {
			if st.Status.Phase != "finished" {
				if end, _ = cursorSeq(st.AtCursor); end == 0 {
					end = ^uint64(0)
				}
			}
		}
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		var quiet *time.Timer // set once the stream is established
		show := func(ev client.RunLogEvent) bool {
			c.printRunLog(runID, ev)
			return false
		}
		if end != 0 {
			// The history ends at the cursor end, or when the quiet timer ends
			// the stream's context.
			show = func(ev client.RunLogEvent) bool {
				quiet.Reset(logsQuiet)
				seq, ok := cursorSeq(ev.Cursor)
				if ok && seq > end {
					return true
				}
				c.printRunLog(runID, ev)
				return ok && seq == end
			}
		}
		if *execution != "" {
			if _, *execution, err = c.resolveRunExecution(s, runID, *execution); err != nil {
				return err
			}
		}
		f, err := client.FollowRunLogs(ctx, c.followOptions(s, runID, *from), *execution)
		if err != nil {
			return c.fail(err)
		}
		if end != 0 {
			quiet = time.AfterFunc(logsQuiet, cancel)
			defer quiet.Stop()
		}
		err = followStream(c, f, show)
		if err == nil && *follow && s.ctx.Err() != nil {
			c.detached(runID, "oecp run logs "+runID+" --follow")
		}
		return err
	})
}

// detached says, after Ctrl-C ended a command that follows a run, that the
// run goes on without it, and how to follow it again or stop it.
func (c *cli) detached(runID, again string) {
	fmt.Fprintf(c.stderr, "oecp %s: interrupted; run %s goes on without this command: `%s` follows it again, `oecp run force %s` stops it\n", c.name, runID, again, runID)
}

// printRunLog prints one log record: level, the execution without the
// run id it starts with ("run" for a run-wide record), message.
func (c *cli) printRunLog(runID string, ev client.RunLogEvent) {
	if c.machine() {
		c.printRaw(ev.Raw)
		return
	}
	who := "run"
	if ev.Execution != "" {
		who = strings.TrimPrefix(ev.Execution, runID+"/")
	}
	line := fmt.Sprintf("%-5s %s: %s", ev.Record.Level, who, ev.Record.Message)
	if c.output == "wide" {
		line = ev.Cursor + " " + line
	}
	c.stampedLine(c.stdout, line, c.replayed(ev.Cursor))
}

func runAttachCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run attach", "run attach ID EXECUTION [flags]",
		`Streams the live output of one active execution of a run until it settles.
EXECUTION is an execution ref from 'oecp run status' or 'oecp run watch', or the
name of a node: its latest execution. There is no history: 'oecp run logs
--execution' prints what an execution has written.`,
		stdout, stderr, false, false)
	c.fs.cmd.ValidArgsFunction = c.completeRunIDs(2)
	return c.fs.run(func(args []string) error {
		s, err := c.startRun(args, 2)
		if err != nil {
			return err
		}
		defer s.close()
		runID, execution, err := c.resolveRunExecution(s, c.args[0], c.args[1])
		if err != nil {
			return err
		}
		sub, _, err := s.conn.RunAttach(s.ctx, runID, execution)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(stderr, "oecp run attach: attached to execution %s (Ctrl-C to detach)\n", execution)
		return pump(s, sub, "oecp run attach "+runID+" "+execution, func(ev client.RunAttachEvent) bool {
			return c.showAttach(ev.Event, ev.Raw)
		})
	})
}

// resolveRunExecution is the execution ref arg names in run runID: an
// execution ref of the run, or a node name standing for the node's latest
// execution (active or ended). Nothing matching is an error (exit 1).
func (c *cli) resolveRunExecution(s *session, runID, arg string) (string, string, error) {
	execs, err := runExecutions(s.ctx, s.conn, runID)
	if err != nil {
		return "", "", c.fail(err)
	}
	ref, ok := latestExecution(execs, arg)
	if !ok {
		return "", "", c.failf(exitError, "run %s has no execution %q, nor a node of that name that has run", runID, arg).
			hint(fmt.Sprintf("`oecp run watch %s` shows its executions as they start and end.", runID))
	}
	return runID, ref, nil
}
