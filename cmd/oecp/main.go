// Command oecp is the one binary of the project: `oecp serve` runs a
// capsule (WebSocket or NDJSON on stdio), and the other subcommands are the
// client side (plan, apply, get, watch, ...) and offline tools (verify).
package main

import (
	"fmt"
	"github.com/spf13/cobra"
	"io"
	"os"
	"sort"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitError = 1 // the server answered with an error, or a run failed
	exitUsage = 2 // bad usage, unreadable input, connection refused
)

// command is one subcommand: its summary in the command list, and the
// constructor of its cobra command (flags and action), which prints on
// stdout and stderr.
type command struct {
	summary string
	build   func(stdout, stderr io.Writer) *cobra.Command
}

// commands are the subcommands by name.
var commands = map[string]command{
	"serve":    {"run a capsule: serve one cluster over WebSocket or NDJSON on stdio", serveCmd},
	"plan":     {"verify a graph without admitting it: diagnostics and bounds", planCmd},
	"apply":    {"admit a graph and start a run (--watch follows it to its end)", applyCmd},
	"get":      {"show the cluster: phase, generation, run, operational status, result", getCmd},
	"update":   {"change the current run's labels, log level or suspension", updateCmd},
	"stop":     {"stop the current run (drain, or --force)", stopCmd},
	"retry":    {"retry the latest failed step of the current run", retryCmd},
	"resubmit": {"start a new run of the finished graph", resubmitCmd},
	"delete":   {"delete the finished cluster and its run history", deleteCmd},
	"watch":    {"follow a run's events until it finishes (or forever with --follow)", watchCmd},
	"logs":     {"stream the cluster's live log records", logsCmd},
	"attach":   {"stream the live output of one execution", attachCmd},
	"verify":   {"verify a graph or a worker descriptor offline", verifyCmd},
	"version":  {"print the oecp version and protocol version", versionCmd},
	"run":      {"native runs: submit, list, status, watch, logs, attach, force, export", runGroupCmd},
}

func init() {
	// Set here rather than in the literal: they read the table themselves.
	commands["help"] = command{"print the usage of oecp, or of one command (oecp help CMD)", nil}
	commands["completion"] = command{"print a shell completion script: oecp completion bash|zsh|fish|powershell", completionCmd}
}

// commandNames are the subcommands in alphabetical order.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: oecp <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, n := range commandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The connection flags "+globalFlagList()+" may also come before the command.")
	fmt.Fprintln(w, "Run 'oecp help <command>' (or 'oecp <command> --help') for a command's flags;")
	fmt.Fprintln(w, "'oecp --version' prints the version.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// newRoot builds the command tree, printing on stdout and stderr. Each
// invocation gets a fresh tree (fresh flag values).
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "oecp",
		SilenceErrors: true,
		SilenceUsage:  true,
		// The root's own -h, --help and --version are handled by run.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetHelpFunc(func(*cobra.Command, []string) { usage(stdout) })
	for _, n := range commandNames() {
		if c := commands[n]; c.build != nil {
			cmd := c.build(stdout, stderr)
			cmd.Short = c.summary
			root.AddCommand(cmd)
		}
	}
	root.SetHelpCommand(helpCmd(root, stdout, stderr))
	return root
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help":
		usage(stdout)
		return exitOK
	case "--version":
		args[0] = "version"
	}
	args, err := hoistGlobalFlags(args)
	if err != nil {
		return exitCode((&exitErr{code: exitUsage, text: "oecp: " + err.Error() + "\n"}).hint("Run 'oecp help' for the list of commands."), stderr)
	}
	root := newRoot(stdout, stderr)
	if _, ok := commands[args[0]]; !ok && !isCobraInternal(args[0]) {
		return exitCode(unknownCommand(root, args[0]), stderr)
	}
	root.SetArgs(args)
	defer startCLITrace(args[0])()
	err = root.Execute()
	if n := caught.Load(); n != 0 {
		return 128 + int(n) // interrupted: whatever the command was doing is moot
	}
	return exitCode(err, stderr)
}

// unknownCommand is the usage error of `oecp NAME` for an unknown NAME,
// with the commands it may be a typo of.
func unknownCommand(root *cobra.Command, name string) error {
	return didYouMean(&exitErr{code: exitUsage, text: fmt.Sprintf("oecp: unknown command %q\n", name)}, root, name).
		hint("Run 'oecp help' for the list of commands.")
}

// suggestionDistance is the largest edit distance at which a mistyped
// command name is suggested a command.
const suggestionDistance = 2

// didYouMean adds to e the subcommands of parent that name may be a typo
// of (cobra's suggestions: a small edit distance, or a prefix).
func didYouMean(e *exitErr, parent *cobra.Command, name string) *exitErr {
	parent.SuggestionsMinimumDistance = suggestionDistance
	for _, s := range parent.SuggestionsFor(name) {
		e = e.hint(fmt.Sprintf("Did you mean '%s %s'?", parent.CommandPath(), s))
	}
	return e
}

// isCobraInternal reports whether name is one of cobra's hidden commands:
// the shell completion scripts call `oecp __complete ARGS…`.
func isCobraInternal(name string) bool {
	return name == cobra.ShellCompRequestCmd || name == cobra.ShellCompNoDescRequestCmd
}

// helpCmd is `oecp help [CMD [SUBCMD]]`: the usage of oecp, or of the named
// command, on stdout.
func helpCmd(root *cobra.Command, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use: "help",
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return commandNames(), cobra.ShellCompDirectiveNoFileComp
		},
		Short:              commands["help"].summary,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0, args[0] == "-h", args[0] == "--help":
				usage(stdout)
				return nil
			case len(args) > 2 || (len(args) == 2 && args[0] != "run" && args[0] != "template" && args[0] != "target"):
				return failf("help", exitUsage, "give at most one command name (or run, template or target and one of its commands)")
			}
			if _, ok := commands[args[0]]; !ok || args[0] == "help" {
				if ok {
					usage(stdout)
					return nil
				}
				return didYouMean(failf("help", exitUsage, "unknown command %q", args[0]), root, args[0]).hint("Run 'oecp help' for the list of commands.")
			}
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				// `help run nope`: the group's own answer to an unknown command.
				return groupUnknown(target, args[1])
			}
			target.HelpFunc()(target, nil)
			return nil
		},
	}
}
