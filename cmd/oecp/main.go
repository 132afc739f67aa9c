// Command oecp is the one binary of the project: `oecp serve` runs a
// capsule (WebSocket or NDJSON on stdio), and the other subcommands are the
// client side (plan, apply, get, watch, ...) and offline tools (verify).
package main

import (
	"fmt"
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

// command is one subcommand. run returns nil on success, else the error
// that ends it (see exitCode).
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands by name.
var commands = map[string]command{
	"serve":    {"run a capsule: serve one cluster over WebSocket or NDJSON on stdio", runServe},
	"plan":     {"verify a graph without admitting it: diagnostics and bounds", runPlan},
	"apply":    {"admit a graph and start a run (--watch follows it to its end)", runApply},
	"get":      {"show the cluster: phase, generation, run, operational status, result", runGet},
	"update":   {"change the current run's labels, log level or suspension", runUpdate},
	"stop":     {"stop the current run (drain, or --force)", runStop},
	"retry":    {"retry the latest failed step of the current run", runRetry},
	"resubmit": {"start a new run of the finished graph", runResubmit},
	"delete":   {"delete the finished cluster and its run history", runDelete},
	"watch":    {"follow a run's events until it finishes (or forever with --follow)", runWatch},
	"logs":     {"stream the cluster's live log records", runLogs},
	"attach":   {"stream the live output of one execution", runAttach},
	"verify":   {"verify a graph or a worker descriptor offline", runVerify},
	"version":  {"print the oecp version and protocol version", runVersion},
	"run":      {"native runs: submit, list, status, watch, logs, attach, force", runRun},
}

func init() {
	// Set here rather than in the literal: they read the table themselves.
	commands["help"] = command{"print the usage of oecp, or of one command (oecp help CMD)", runHelp}
	commands["completion"] = command{"print a shell completion script: oecp completion bash|zsh", runCompletion}
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
	fmt.Fprintln(w, "Run 'oecp help <command>' (or 'oecp <command> --help') for a command's flags;")
	fmt.Fprintln(w, "'oecp --version' prints the version.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
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
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "oecp: unknown command %q\n  Run 'oecp help' for the list of commands.\n", args[0])
		return exitUsage
	}
	err := cmd.run(args[1:], stdout, stderr)
	if n := caught.Load(); n != 0 {
		return 128 + int(n) // interrupted: whatever the command was doing is moot
	}
	return exitCode(err, stderr)
}

// runHelp prints the usage of oecp, or of the named command, on stdout.
func runHelp(args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) == 0, args[0] == "-h", args[0] == "--help":
		usage(stdout)
		return nil
	case len(args) > 2 || (len(args) == 2 && args[0] != "run"):
		return failf("help", exitUsage, "give at most one command name (or run and one of its commands)")
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return failf("help", exitUsage, "unknown command %q", args[0]).hint("Run 'oecp help' for the list of commands.")
	}
	return cmd.run(append(args[1:], "--help"), stdout, stderr)
}
