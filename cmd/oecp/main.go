// Command oecp is the one binary of the project: `oecp serve` runs a
// capsule (WebSocket or NDJSON on stdio), and the other subcommands are the
// client side (plan, apply, get, watch, ..., and `oecp run` for native
// runs, which with apply and plan start a local server when none is chosen
// or answering) and offline tools (verify, template show).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitError = 1 // the server answered with an error, or a run failed
	exitUsage = 2 // bad usage, unreadable input, connection refused
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// newRoot builds the command tree, printing on stdout and stderr. Each
// invocation gets a fresh tree (fresh flag values). The tree is the one
// source of the commands, their flags, help and completion.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "oecp <command> [flags]",
		SilenceErrors: true,
		SilenceUsage:  true,
		// The root's own -h, --help and --version are handled by run.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetHelpFunc(printHelp)
	root.SetFlagErrorFunc(flagErr)
	root.AddCommand(
		summary(serveCmd(stdout, stderr), "run a capsule: serve one cluster over WebSocket or NDJSON on stdio"),
		summary(planCmd(stdout, stderr), "verify a graph without admitting it: diagnostics and bounds"),
		summary(applyCmd(stdout, stderr), "admit a graph and start a run (--watch follows it to its end)"),
		summary(getCmd(stdout, stderr), "show the cluster: phase, generation, run, operational status, result"),
		summary(updateCmd(stdout, stderr), "change the current run's labels, log level or suspension"),
		summary(stopCmd(stdout, stderr), "stop the current run (drain, or --force)"),
		summary(retryCmd(stdout, stderr), "retry the latest failed step of the current run"),
		summary(resubmitCmd(stdout, stderr), "start a new run of the finished graph"),
		summary(deleteCmd(stdout, stderr), "delete the finished cluster and its run history"),
		summary(watchCmd(stdout, stderr), "follow a run's events until it finishes (or forever with --follow)"),
		summary(logsCmd(stdout, stderr), "stream the cluster's live log records"),
		summary(attachCmd(stdout, stderr), "stream the live output of one execution"),
		summary(verifyCmd(stdout, stderr), "verify a graph or a worker descriptor offline"),
		summary(versionCmd(stdout, stderr), "print the oecp version and protocol version"),
		summary(runGroupCmd(stdout, stderr), "native runs: submit, list, status, watch, logs, attach, force, export"),
		summary(templateGroupCmd(stdout, stderr), "built-in graphs: list them, or show one as a GraphSpec to copy and change"),
		summary(targetGroupCmd(stdout, stderr), "named servers: add, use, list or remove the targets client commands go to"),
		summary(completionCmd(stdout, stderr), "print a shell completion script: oecp completion bash|zsh|fish|powershell"),
	)
	root.SetHelpCommand(helpCmd(root))
	root.InitDefaultHelpCmd()
	return root
}

func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	if len(args) == 0 {
		writeHelp(stderr, root)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help":
		writeHelp(stdout, root)
		return exitOK
	case "--version":
		args[0] = "version"
	}
	args, err := hoistGlobalFlags(root, args)
	if err != nil {
		return exitCode((&exitErr{code: exitUsage, text: "oecp: " + err.Error() + "\n"}).hint("Run 'oecp help' for the list of commands."), stderr)
	}
	if subcommand(root, args[0]) == nil && !isCobraInternal(args[0]) {
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
