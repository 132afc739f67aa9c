package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
	"github.com/spf13/cobra"
)

// runGroupCmd is `oecp run <command>`, the native runs.
func runGroupCmd(stdout, stderr io.Writer) *cobra.Command {
	return newGroup("run", "Native runs: any number per tenant, each a graph with a runtime plan that binds its\nnodes to agents of the server's --harness file.",
		summary(runSubmitCmd(stdout, stderr), "submit a graph as a new native run (--watch follows it to its end)"),
		summary(runListCmd(stdout, stderr), "list your runs, newest first: id, title, phase, age, active executions"),
		summary(runStatusCmd(stdout, stderr), "show one run: title, source, size, phase, active executions, result"),
		summary(runWatchCmd(stdout, stderr), "follow a run's status until it finishes (exit 0 succeeded, 1 failed)"),
		summary(runLogsCmd(stdout, stderr), "print a run's durable log records (--follow: until the run ends)"),
		summary(runAttachCmd(stdout, stderr), "stream the live output of one active execution"),
		summary(runForceCmd(stdout, stderr), "stop a run at once: it finishes failed (force_stopped)"),
		summary(runExportCmd(stdout, stderr), "export a run as JSONL: its trace, or the agents' output as semantic events"),
		summary(runHarnessesCmd(stdout, stderr), "list the harnesses the server offers runs, with their models"),
	)
}

func runSubmitCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run submit", "run submit (-f GRAPH | --template NAME [--pr | --ship]) [--runtime FILE | --harness codex|claude] [--model [ROLE=]M]… [--task TEXT|@FILE | --issue REF | --input JSON|@FILE] [--title T] [--id ID] [--key K] [--source "+sourceSyntax+"] [--watch] [flags]",
		`Submits a native run: the graph (a file, or a built-in --template), its initial input
(default null; --task builds it from a task, --issue from an issue), the runtime plan
(which harness, provider and size, and a binding per executable node; a file, or built
by --harness) and the source.
Without --runtime and --harness the plan is built on the server's harness when it offers
exactly one ('oecp run harnesses' lists them); a --harness or --model it does not offer is
refused before anything is submitted.
--id is generated when absent: a UUIDv7, whose leading bits are the time it was made.
--source defaults to the git checkout of the current directory: its origin remote as
OWNER/NAME, the branch HEAD is on, and HEAD's exact commit (uncommitted changes are
not part of it). --key defaults to a digest of the submission (plus --id when given),
so running the same command again answers the run it already started; pass another
--key (or --id) to start it anew. --title defaults to the task's first line, else the graph
file's name.
A submission the server already has (the same submission key) answers that run and
says so before anything of it is shown.
--watch follows the run to its end as 'oecp run watch' does: exit 0 if it succeeded,
1 if it failed. When the source is the git checkout here and the run delivered a branch,
that oecp/run-… branch is then fetched from the checkout's origin (your branches and work
tree are left alone), so that 'git diff main...oecp/run-…' shows the change.`,
		stdout, stderr, false, false)
	c.addTimestamps()
	file := c.fs.String("f", "", "`GRAPH` file (JSON GraphSpec; - for stdin)")
	runtime := c.fs.String("runtime", "", "runtime plan `FILE` (JSON RuntimePlan)")
	title := c.fs.String("title", "", "`TITLE` of the run (default: the task's first line, else the graph file's name)")
	input := c.fs.String("input", "null", "initial input: a `JSON` value, or @FILE")
	id := c.fs.String("id", "", "run `ID` (default: a fresh UUIDv7)")
	key := c.fs.String("key", "", "submission `KEY` (default: a digest of the submission)")
	source := c.fs.String("source", "", "source snapshot `"+sourceSyntax+"` (default: the git checkout here)")
	watch := c.fs.Bool("watch", false, "follow the run until it finishes")
	tf := c.addTaskFlags()
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 0, 0); err != nil {
			return err
		}
		// The session opens when the plan needs the server's harness
		// entries, else once the submission is built.
		ls := &lazySession{cli: c}
		defer ls.close()
		tf.offer = ls.offer()
		p, err := c.submission(tf, *file, *runtime, *title, *input, *id, *key, *source)
		if err != nil {
			return err
		}
		s, err := ls.checked(tf)
		if err != nil {
			return err
		}
		// A run of an explicit --id that exists already is answered, not
		// started, when the submission is the same: the result's run id
		// cannot tell.
		existed := false
		if *id != "" {
			_, err := s.conn.RunStatus(s.ctx, *id)
			existed = err == nil
		}
		var r client.RunSubmitResult
		done, err := s.runResult(protocol.MethodRunSubmit, p, &r)
		if err != nil {
			return err
		}
		if r.RunID != p.RunID || existed {
			c.answeredEarlier(r.RunID, *watch)
		}
		if !done {
			fmt.Fprintf(stdout, "submitted: run %s\n", r.RunID)
		}
		if !*watch {
			return nil
		}
		err = c.watchRun(s, r.RunID, "")
		var sub client.RunSubmission
		if json.Unmarshal(p.Submission, &sub) == nil {
			c.fetchDelivered(c.checkout, sub.Source.Repository, c.delivered)
		}
		return err
	})
}

// answeredEarlier says, before anything of that run is shown, that a
// submission answered run runID, submitted earlier with the same
// submission key, instead of starting a new run; watch says its history
// follows.
func (c *cli) answeredEarlier(runID string, watch bool) {
	then := ""
	if watch {
		then = "; what follows is that run's history"
	}
	fmt.Fprintf(c.stderr, "oecp run submit: this submission was already submitted, as run %s: it was not started again%s (pass another --key to start it anew)\n", runID, then)
}

// submission builds run/submit's params from the submit flags.
func (c *cli) submission(tf *taskFlags, file, runtimeFile, title, input, id, key, source string) (client.RunSubmitParams, error) {
	var p client.RunSubmitParams
	var sub client.RunSubmission
	// The source is resolved once: by --issue when it needs the source's
	// repository, else after the other parts.
	var src *client.RunSource
	tf.source = func() (client.RunSource, error) {
		if src == nil {
			s, err := c.source(source)
			if err != nil {
				return s, err
			}
			src = &s
		}
		return *src, nil
	}
	defTitle, err := c.submissionParts(&sub, tf, file, runtimeFile, input)
	if err != nil {
		return p, err
	}
	if sub.Source, err = tf.source(); err != nil {
		return p, err
	}
	sub.Title = title
	if sub.Title == "" {
		sub.Title = defTitle
	}
	sub.SubmissionKey = key
	if key == "" {
		sub.SubmissionKey = submissionKey(sub, id)
	}
	p.RunID = id
	if id == "" {
		p.RunID = client.NewRunID()
	}
	p.Submission, err = json.Marshal(sub)
	return p, err
}

// source is --source, else the git checkout of the current directory.
func (c *cli) source(flag string) (client.RunSource, error) {
	if flag != "" {
		src, err := parseSource(flag)
		if err != nil {
			return src, c.usageErr("%v", err)
		}
		return src, nil
	}
	src, top, err := gitSource()
	if err != nil {
		return src, c.usageErr("no --source, and %v", err).
			hint("Give the source with --source " + sourceSyntax + " (e.g. acme/widgets@main:<40 hex digits>), or run this in a git checkout on a branch with an origin remote.")
	}
	fmt.Fprintf(c.stderr, "oecp %s: source %s (the git checkout %s)\n", c.name, formatSource(src), top)
	c.checkout = top
	return src, nil
}

// startRun parses a run command with n positional arguments and opens its
// session; the caller defers s.close().
func (c *cli) startRun(args []string, n int) (*session, error) {
	if err := c.parse(args, n, n); err != nil {
		return nil, err
	}
	return c.open()
}

// runCall runs a unary run command: with no positional argument it sends
// method with empty params, with one it sends {"runId": it}. It decodes
// the result into r; done reports that the command is over (the call
// failed, err says how, or --json printed the raw result).
func (c *cli) runCall(args []string, n int, method string, r any) (done bool, err error) {
	s, err := c.startRun(args, n)
	if err != nil {
		return true, err
	}
	defer s.close()
	var params any = struct{}{}
	if n == 1 {
		params = map[string]string{"runId": c.args[0]}
	}
	return s.runResult(method, params, r)
}

// runResult is result for the run commands (see runCall).
func (s *session) runResult(method string, params, r any) (done bool, err error) {
	raw, err := s.call(method, params, r)
	switch {
	case err != nil:
		return true, s.fail(err)
	case s.machine():
		s.printRaw(raw)
		return true, nil
	}
	return false, nil
}

func runListCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run list", "run list [-o json|yaml|wide] [flags]",
		`Lists your runs, newest first: id, title, phase (and result), age and active executions.
AGE is read from the run id: ids made by 'oecp run submit' (UUIDv7) carry the time they
were made; other ids show -. The protocol records no times, so there is no duration.
-o wide adds each run's source, size and cursor.`,
		stdout, stderr, false, false)
	c.addOutput()
	var r client.RunListResult
	return c.fs.run(func(args []string) error {
		if done, err := c.runCall(args, 0, protocol.MethodRunList, &r); done {
			return err
		}
		if len(r.Runs) == 0 {
			fmt.Fprintln(stdout, "no runs; start one with `oecp run submit`")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		wide := c.output == "wide"
		head := "RUN\tTITLE\tPHASE\tAGE\tACTIVE"
		if wide {
			head += "\tSOURCE\tSIZE\tCURSOR"
		}
		fmt.Fprintln(tw, head)
		now := time.Now()
		for _, run := range r.Runs {
			row := strings.Join([]string{run.RunID, shorten(run.Title, 40), phaseSummary(run.Status), age(run.RunID, now), activeNodes(run.Status)}, "\t")
			if wide {
				row += "\t" + formatSource(run.Source) + "\t" + run.Size + "\t" + run.AtCursor
			}
			fmt.Fprintln(tw, row)
		}
		return tw.Flush()
	})
}

// phaseSummary is a run's phase, with the result once it has finished.
func phaseSummary(st client.RunStatus) string {
	if tr := st.TerminalResult; st.Phase == "finished" && tr != nil {
		if tr.Reason != "" {
			return "finished (" + tr.Status + ": " + tr.Reason + ")"
		}
		return "finished (" + tr.Status + ")"
	}
	return st.Phase
}

func activeNodes(st client.RunStatus) string {
	if len(st.ActiveExecutions) == 0 {
		return "-"
	}
	nodes := make([]string, len(st.ActiveExecutions))
	for i, x := range st.ActiveExecutions {
		nodes[i] = x.Node
	}
	return strings.Join(nodes, ", ")
}

// age is how long ago a run id was made (see client.RunIDTime), or "-".
func age(runID string, now time.Time) string {
	t, ok := client.RunIDTime(runID)
	if !ok {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func runStatusCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run status", "run status ID [-o json|yaml] [flags]", "Shows one run: title, source, size, phase, its active executions (the refs\n'oecp run logs --execution' and 'oecp run attach' take), once finished its result, and\nwhere a git delivery put its change: the branch and the pull request (its address where\nthe server knows it, else its number). -o json adds that as \"delivery\" after the\nserver's members.", stdout, stderr, false, false)
	c.addOutput()
	c.fs.cmd.ValidArgsFunction = c.completeRunIDs(1)
	return c.fs.run(func(args []string) error {
		return c.showRun(args, protocol.MethodRunStatus)
	})
}

func runForceCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run force", "run force ID [flags]",
		`Stops a run at once: every active execution ends as a refusal and the run finishes
failed (force_stopped). The status shown is the run's where the force was recorded.
Forcing a finished run changes nothing.`,
		stdout, stderr, false, false)
	c.fs.cmd.ValidArgsFunction = c.completeRunIDs(1)
	return c.fs.run(func(args []string) error {
		return c.showRun(args, protocol.MethodRunForce)
	})
}

// showRun sends run/status or run/force for the one run id argument and
// prints the run.
func (c *cli) showRun(args []string, method string) error {
	if method == protocol.MethodRunStatus {
		return c.showRunStatus(args)
	}
	var r client.RunStatusResult
	if done, err := c.runCall(args, 1, method, &r); done {
		return err
	}
	c.printRun(r, method)
	return nil
}

// showRunStatus is run status: the run, and where its delivery went (read
// from its log history; as "delivery" after the server's members with -o
// json or yaml).
func (c *cli) showRunStatus(args []string) error {
	s, err := c.startRun(args, 1)
	if err != nil {
		return err
	}
	defer s.close()
	var r client.RunStatusResult
	raw, err := s.call(protocol.MethodRunStatus, map[string]string{"runId": c.args[0]}, &r)
	if err != nil {
		return c.fail(err)
	}
	receipt, _ := runReceipt(s.ctx, s.conn, &r)
	if c.machine() {
		c.printRaw(withDelivery(raw, receipt))
		return nil
	}
	c.printRun(r, protocol.MethodRunStatus)
	if receipt != nil {
		for _, l := range deliveryLines(*receipt) {
			fmt.Fprintln(c.stdout, l)
		}
	}
	return nil
}

// printRun prints a run/status or run/force result as text.
func (c *cli) printRun(r client.RunStatusResult, method string) {
	w := c.stdout
	if method == protocol.MethodRunForce {
		if r.Status.Phase == "finished" {
			fmt.Fprintf(w, "run %s had already finished: nothing to stop\n", r.RunID)
		} else {
			fmt.Fprintf(w, "force stop recorded for run %s: its active executions end as refusals and it finishes failed (force_stopped)\n", r.RunID)
		}
	}
	fmt.Fprintf(w, "run:      %s\n", r.RunID)
	fmt.Fprintf(w, "title:    %s\n", r.Title)
	fmt.Fprintf(w, "source:   %s\n", formatSource(r.Source))
	fmt.Fprintf(w, "size:     %s\n", r.Size)
	fmt.Fprintf(w, "phase:    %s\n", r.Status.Phase)
	fmt.Fprintf(w, "cursor:   %s\n", r.AtCursor)
	for _, x := range r.Status.ActiveExecutions {
		fmt.Fprintf(w, "active:   %s (execution %s)\n", x.Node, x.Execution)
	}
	if tr := r.Status.TerminalResult; tr != nil {
		fmt.Fprintf(w, "result:   %s\n", resultSummary(tr))
	}
}

// resultSummary renders a terminal result: its status, then the output of
// a success or the reason of a failure.
func resultSummary(tr *protocol.TerminalResult) string {
	switch {
	case tr.Status == "succeeded" && tr.Output != nil:
		return "succeeded, output " + string(*tr.Output)
	case tr.Reason != "":
		return tr.Status + ": " + tr.Reason
	}
	return tr.Status
}

// reportRunEnd prints how a run ended (on stderr with --json) and returns
// nil when it succeeded, exit 1 otherwise.
func (c *cli) reportRunEnd(runID string, tr *protocol.TerminalResult) error {
	out := c.stdout
	if c.machine() {
		out = c.stderr
	}
	switch tr.Status {
	case "succeeded":
		fmt.Fprintf(out, "run %s succeeded\n", runID)
		if tr.Output != nil && !c.machine() {
			fmt.Fprintf(out, "output: %s\n", *tr.Output)
		}
	case "failed":
		fmt.Fprintf(out, "run %s failed: %s\n", runID, tr.Reason)
	default:
		fmt.Fprintf(out, "run %s ended %s\n", runID, tr.Status)
	}
	if c.delivered != nil {
		for _, l := range deliveryLines(*c.delivered) {
			fmt.Fprintln(out, l)
		}
	}
	if tr.Status == "succeeded" {
		return nil
	}
	return exitWith(exitError)
}

// hostRefusal reports whether a submit refusal's reason is about the
// server's harness configuration, which its operator owns, rather than the
// submission.
func hostRefusal(reason string) bool {
	for _, p := range []string{"harness not configured", "environment variable not allowed by the harness", "the plan uses harness"} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}

// explainRun is explain for the run commands: why the server refused one
// and what to do; ok is false where explain's common answer applies.
func explainRun(e *client.Error) (why, todo string, ok bool) {
	switch e.DataCode {
	case protocol.GraphInvalid:
		why = "the graph does not verify"
		e.Detail("reason", &why)
		if hostRefusal(why) {
			return why, "use a harness (and env) this server offers in the --runtime plan, or ask the server's operator to configure it", true
		}
		if repo, ok := strings.CutPrefix(why, unservedPrefix); ok {
			return unserved(repo)
		}
		return why, "fix the submission (the graph, the --runtime plan or the --input) and submit it again", true
	case protocol.RunConflict:
		return "that run id is taken by a different submission", "choose another --id, or leave --id out for a fresh one", true
	case protocol.IdempotencyReuse:
		var run string
		e.Detail("runId", &run)
		return fmt.Sprintf("that submission key names run %s, a different submission", run), "pass another --key, or leave --key out", true
	case protocol.NotFound:
		return "no such run or execution", "`oecp run list` lists the runs, `oecp run status ID` a run's active executions", true
	case protocol.Gone:
		return "that execution is no longer active", "`oecp run logs ID --execution EXECUTION` prints its output", true
	case protocol.InvalidPhase:
		if e.Message == protocol.MsgCursorUnavailable {
			return "the run has no such cursor", "give one from this run's events (--json shows them), or leave --from out", true
		}
	}
	return "", "", false
}
