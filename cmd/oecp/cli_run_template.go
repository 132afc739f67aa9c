package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/delivery"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/templates"
)

// taskFlags are run submit's flags that build a submission without
// files: a built-in graph (--template, with --pr or --ship), the task the
// graph's agents get (--task), and the runtime plan (--harness, --model,
// --size, --agent-env). source is the run's source, resolved when --issue
// needs it.
type taskFlags struct {
	template string
	task     string
	issue    string
	forge    string
	delivery *deliveryFlags
	harness  string
	models   []string
	size     string
	env      string
	source   func() (client.RunSource, error)
	// offer asks the server what it offers (nil: it cannot be asked);
	// chosen is set once harness came from it rather than --harness.
	offer  *offer
	chosen bool
}

// addTaskFlags adds the taskFlags to run submit.
func (c *cli) addTaskFlags() *taskFlags {
	tf := &taskFlags{}
	c.fs.StringVar(&tf.template, "template", "", "a built-in graph `NAME` instead of -f (oecp template list)")
	c.fs.StringVar(&tf.task, "task", "", "the `TEXT` of the task (Markdown), or @FILE (@- for stdin): the graph's task field, its other string fields seeded empty")
	c.fs.StringVar(&tf.issue, "issue", "", "the task is the issue `REF` (123, OWNER/NAME#123 or its URL), read with gh or glab; the pull request closes it")
	c.fs.StringVar(&tf.forge, "forge", "", "with --issue: the `FORGE` of a number or OWNER/NAME#N, github (gh) or gitlab (glab) (default: the origin's host says; github)")
	tf.delivery = addDeliveryFlags(c.fs, "with --template: ")
	c.fs.StringVar(&tf.harness, "harness", "", "build the runtime plan instead of --runtime: every agent on `HARNESS` codex (OpenAI) or claude (Anthropic) (default: the server's only harness)")
	c.fs.StringArrayVar(&tf.models, "model", nil, "with --harness: the `MODEL` of every agent, or of a ROLE (worker, verifier) or NODE with ROLE=MODEL, NODE=MODEL; repeatable (default gpt-5.6 for codex, claude-sonnet-5 for claude)")
	c.fs.StringVar(&tf.size, "size", "small", "with --harness: the run's `SIZE`: tiny, small, standard or large")
	c.fs.StringVar(&tf.env, "agent-env", "", "with --harness: the environment `NAMES` (comma-separated; none for none) every agent declares (default: OPENAI_API_KEY for codex, ANTHROPIC_API_KEY for claude)")
	_ = c.fs.cmd.RegisterFlagCompletionFunc("template", completeTemplates)
	_ = c.fs.cmd.RegisterFlagCompletionFunc("harness", fixedCompletion("codex", "claude"))
	_ = c.fs.cmd.RegisterFlagCompletionFunc("forge", fixedCompletion(forgeGitHub, forgeGitLab))
	_ = c.fs.cmd.RegisterFlagCompletionFunc("size", fixedCompletion(runSizes...))
	c.fs.note("A built-in graph: --template NAME --task TEXT (or @FILE, Markdown) runs the template's agents on the task; " +
		"--issue REF takes the task from an issue (its title and body, read with the forge's CLI: gh or glab) and the pull request closes it; " +
		"--pr delivers the accepted change as a pull request into the source branch, --ship also merges it once its checks pass " +
		"(software-change only). --harness codex|claude builds the runtime plan (--model M for every agent, --model verifier=M " +
		"or --model NODE=M for some), so no file is needed: " +
		"oecp run submit --template software-change --task @TASK.md --harness claude --pr --watch")
	return tf
}

func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// submissionParts fills sub's graph, runtime plan and initial input from
// the submit flags, and returns the default title: the task's first line,
// else the graph file's name or the template's. The flags are all checked
// before --issue reads the issue.
func (c *cli) submissionParts(sub *client.RunSubmission, tf *taskFlags, file, runtimeFile, input string) (string, error) {
	title, err := c.submissionGraph(sub, tf, file)
	if err != nil {
		return "", err
	}
	// The decoded graph, for --task and --harness (a file that does not
	// decode is left for the server to explain, as before).
	var g *graph.GraphSpec
	decoded := func() (*graph.GraphSpec, error) {
		if g != nil {
			return g, nil
		}
		dg, derr := graph.Decode(sub.Graph)
		if derr != nil {
			return nil, c.usageErr("graph file %s is not a valid GraphSpec: %v", file, derr)
		}
		g = dg
		return g, nil
	}
	if err := c.checkTaskFlags(tf); err != nil {
		return "", err
	}
	if err := c.submissionRuntime(sub, tf, runtimeFile, decoded); err != nil {
		return "", err
	}
	return c.submissionInput(sub, tf, input, title, decoded)
}

// submissionGraph fills sub's graph from -f or --template and returns the
// default title.
func (c *cli) submissionGraph(sub *client.RunSubmission, tf *taskFlags, file string) (string, error) {
	d, err := tf.delivery.delivery(c.fs)
	if err != nil {
		return "", err
	}
	switch {
	case tf.template != "" && file != "":
		return "", c.fs.usageErr("-f and --template exclude each other: -f runs your own graph, --template a built-in one")
	case tf.template != "":
		if sub.Graph, err = materialise(c.fs, tf.template, d); err != nil {
			return "", err
		}
		return tf.template, nil
	case file == "":
		return "", c.fs.usageErr("give the graph with -f GRAPH, or a built-in one with --template NAME ('oecp template list')")
	case tf.delivery.given():
		return "", c.fs.usageErr("--pr and --ship choose the delivery of a --template graph; a graph of your own declares its own (a git delivery node)")
	}
	if sub.Graph, err = readGraph(file); err != nil {
		return "", c.usageErr("%v", err)
	}
	return defaultTitle(file), nil
}

// checkTaskFlags checks how the task is given: --task, --issue and
// --input exclude each other, a template needs a task, --forge goes with
// --issue, and --issue is one of its spellings.
func (c *cli) checkTaskFlags(tf *taskFlags) error {
	inputGiven := flagGiven(c.fs, "input")
	switch {
	case tf.task != "" && tf.issue != "":
		return c.fs.usageErr("--task and --issue exclude each other: --issue takes the task from the issue")
	case tf.task != "" && inputGiven:
		return c.fs.usageErr("--task and --input exclude each other: --task builds the input from the task")
	case tf.issue != "" && inputGiven:
		return c.fs.usageErr("--issue and --input exclude each other: --issue builds the input from the issue")
	case tf.forge != "" && tf.issue == "":
		return c.fs.usageErr("--forge goes with --issue: it says whose CLI reads the issue")
	case tf.template != "" && tf.task == "" && tf.issue == "" && !inputGiven:
		return c.fs.usageErr("give the task of --template %s with --task TEXT, --task @FILE or --issue REF", tf.template)
	}
	if tf.issue != "" {
		ref, err := parseIssueRef(tf.issue)
		if err == nil {
			_, err = issueForge(ref, tf.forge, remote{})
		}
		if err != nil {
			return c.fs.usageErr("%v", err)
		}
	}
	return nil
}

// submissionRuntime fills sub's runtime plan from --runtime, --harness, or
// the server's only harness.
func (c *cli) submissionRuntime(sub *client.RunSubmission, tf *taskFlags, runtimeFile string, decoded func() (*graph.GraphSpec, error)) error {
	planFlags := flagGiven(c.fs, "model") || flagGiven(c.fs, "size") || flagGiven(c.fs, "agent-env")
	var err error
	switch {
	case runtimeFile != "" && tf.harness != "":
		return c.fs.usageErr("--runtime and --harness exclude each other: --runtime gives the plan, --harness builds one")
	case runtimeFile != "" && planFlags:
		return c.fs.usageErr("--model, --size and --agent-env go with --harness; a --runtime plan names its own")
	case runtimeFile != "":
		if sub.Runtime, err = parseJSONArg("--runtime", "@"+runtimeFile); err != nil {
			return c.usageErr("%v", err)
		}
		return nil
	case tf.harness == "":
		// The server's only harness entry, when it names them.
		if tf.harness, err = c.chooseHarness(tf.offer); err != nil {
			return err
		}
		tf.chosen = true
	}
	g, err := decoded()
	if err != nil {
		return err
	}
	if sub.Runtime, err = buildRuntime(g, tf.harness, tf.models, tf.size, agentEnv(tf.env)); err != nil {
		return c.fs.usageErr("%v", err)
	}
	return nil
}

// submissionInput fills sub's initial input from --task, --issue or
// --input and returns the default title.
func (c *cli) submissionInput(sub *client.RunSubmission, tf *taskFlags, input, title string, decoded func() (*graph.GraphSpec, error)) (string, error) {
	var err error
	if tf.task == "" && tf.issue == "" {
		if sub.InitialInput, err = parseJSONArg("--input", input); err != nil {
			return "", c.usageErr("%v", err)
		}
		return title, nil
	}
	g, err := decoded()
	if err != nil {
		return "", err
	}
	flag, text, closes := "--task", "", ""
	if tf.issue != "" {
		flag = "--issue"
		if text, closes, err = c.issueTask(tf); err != nil {
			return "", err
		}
	} else if text, err = readTask(tf.task); err != nil {
		return "", c.usageErr("%v", err)
	}
	if sub.InitialInput, err = templates.TaskInput(g, text); err != nil {
		if errors.Is(err, templates.ErrTaskGraph) {
			return "", c.usageErr("%s: %v", flag, err).hint("Give the initial input with --input JSON|@FILE instead.")
		}
		return "", c.usageErr("%s: %v", flag, err)
	}
	if closes != "" {
		if sub.InitialInput, err = c.closing(g, sub.InitialInput, closes); err != nil {
			return "", err
		}
	}
	return taskTitle(text, title), nil
}

// closing sets the issue a delivering graph's pull request closes; a
// graph that delivers without the field to carry it is refused, one that
// does not deliver takes the issue as its task only.
func (c *cli) closing(g *graph.GraphSpec, in json.RawMessage, closes string) (json.RawMessage, error) {
	out, err := templates.Closing(g, in, closes)
	switch {
	case errors.Is(err, templates.ErrNoCloses) && !delivers(g):
		return in, nil
	case errors.Is(err, templates.ErrNoCloses):
		return nil, c.usageErr("--issue: %v, so its pull request could not close the issue", err).
			hint(`Add a required string field "closes" to its initialInput, bound to the delivery node's input (oecp template show software-change --pr shows how), or give the task with --task.`)
	case err != nil:
		return nil, c.usageErr("--issue: %v", err)
	}
	return out, nil
}

// delivers reports whether g has a git delivery node.
func delivers(g *graph.GraphSpec) bool {
	found := false
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if v, ok := n.(*graph.Verifier); ok && delivery.Mode(v.Worker) != "" {
			found = true
		}
		return !found
	})
	return found
}

// issueTask reads --issue with the forge's CLI: the task (its title and
// body) and the reference the pull request closes it by.
func (c *cli) issueTask(tf *taskFlags) (task, closes string, err error) {
	ref, err := parseIssueRef(tf.issue)
	if err != nil {
		return "", "", c.fs.usageErr("%v", err)
	}
	src, err := tf.source()
	if err != nil {
		return "", "", err
	}
	var origin remote
	if c.checkout != "" {
		origin = originRemote()
	}
	forge, err := issueForge(ref, tf.forge, origin)
	if err != nil {
		return "", "", c.fs.usageErr("%v", err)
	}
	iss, err := readIssue(context.Background(), forge, issueCommand(forge, ref, src.Repository, origin), ref)
	var ie *errIssue
	switch {
	case errors.As(err, &ie):
		return "", "", c.usageErr("%s", ie.msg).hint(ie.hint)
	case err != nil:
		return "", "", c.usageErr("%v", err)
	}
	name := iss.url
	if name == "" {
		name = ref.String()
	}
	fmt.Fprintf(c.stderr, "oecp %s: task from issue %s: %q\n", c.name, name, iss.title)
	return iss.task(), iss.closes(ref, src.Repository), nil
}

// agentEnv is --agent-env: nil for the harness's default, none for no
// names, else the comma-separated names.
func agentEnv(flag string) []string {
	switch strings.TrimSpace(flag) {
	case "":
		return nil
	case "none":
		return []string{}
	}
	var out []string
	for _, n := range strings.Split(flag, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// readTask is --task: its text, or the content of @FILE (@- is stdin).
func readTask(flag string) (string, error) {
	name, isFile := strings.CutPrefix(flag, "@")
	if !isFile {
		return flag, nil
	}
	b, err := readFileOrStdin(name)
	if err != nil {
		return "", errors.New("read --task: " + err.Error())
	}
	return string(b), nil
}

// maxTitleRunes bounds a title taken from a task.
const maxTitleRunes = 80

// taskTitle is a run's title taken from its task: the first line with
// text, without Markdown's heading marks, control characters made spaces,
// shortened; fallback when the task has no such line.
func taskTitle(task, fallback string) string {
	if title := delivery.TitleOf(task, maxTitleRunes); title != "" {
		return title
	}
	return fallback
}
