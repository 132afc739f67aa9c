package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// shells are the shells `oecp completion` writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// completionTimeout bounds what a completion asks the server (run ids,
// executions): a shell waiting on a TAB must not hang on a server that
// does not answer.
const completionTimeout = 2 * time.Second

func completionCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("completion", "completion bash|zsh|fish|powershell",
		`Prints a completion script for the shell: commands (run's too), flags, the values
of -o, file names, and run ids and executions asked of the server (--server,
OECP_SERVER; nothing when no server answers). Load it with
  source <(oecp completion bash)      # in ~/.bashrc (bash-completion recommended)
  source <(oecp completion zsh)       # in ~/.zshrc, after compinit
  oecp completion fish | source       # in ~/.config/fish/config.fish
  oecp completion powershell | Out-String | Invoke-Expression   # in $PROFILE`)
	fs.cmd.ValidArgs = shells
	return fs.run(func(args []string) error {
		if len(args) != 1 {
			return fs.usageErr("give the shell: bash, zsh, fish or powershell")
		}
		root := fs.cmd.Root()
		switch args[0] {
		case "bash":
			return root.GenBashCompletionV2(stdout, true)
		case "zsh":
			return root.GenZshCompletion(stdout)
		case "fish":
			return root.GenFishCompletion(stdout, true)
		case "powershell":
			return root.GenPowerShellCompletionWithDesc(stdout)
		}
		return fs.usageErr("unsupported shell %q: want bash, zsh, fish or powershell", args[0])
	})
}

// completeOutput completes -o.
func completeOutput(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return []string{"json", "yaml", "wide"}, cobra.ShellCompDirectiveNoFileComp
}

// completeRunIDs completes a run id argument with the runs the server
// lists (their titles as descriptions): the first of n positional
// arguments; a command with a second one (run attach) completes it with
// the run's executions and their nodes.
func (c *cli) completeRunIDs(n int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0:
			return c.askServer(func(ctx context.Context, s *completionConn) []string { return s.runIDs(ctx) })
		case len(args) == 1 && n == 2:
			return c.askServer(func(ctx context.Context, s *completionConn) []string { return s.executions(ctx, args[0]) })
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeExecution completes --execution of run logs ID.
func (c *cli) completeExecution(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return c.askServer(func(ctx context.Context, s *completionConn) []string { return s.executions(ctx, args[0]) })
}

// completionConn is a connection opened for one completion.
type completionConn struct{ c *cli }

// askServer connects with the command's flags and returns what ask finds;
// any failure (no server, a refusal) completes nothing.
func (c *cli) askServer(ask func(context.Context, *completionConn) []string) ([]string, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	return ask(ctx, &completionConn{c}), cobra.ShellCompDirectiveNoFileComp
}

func (s *completionConn) runIDs(ctx context.Context) []string {
	conn, _, err := s.c.connect(ctx)
	if err != nil {
		return nil
	}
	defer conn.Close()
	r, err := conn.RunList(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, run := range r.Runs {
		out = append(out, cobra.CompletionWithDesc(run.RunID, run.Title))
	}
	return out
}

// executions are the execution refs of run runID and the names of their
// nodes (each standing for its latest execution).
func (s *completionConn) executions(ctx context.Context, runID string) []string {
	conn, _, err := s.c.connect(ctx)
	if err != nil {
		return nil
	}
	defer conn.Close()
	execs, err := runExecutions(ctx, conn, runID)
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, x := range execs {
		if !seen[x.Node] {
			seen[x.Node] = true
			out = append(out, cobra.CompletionWithDesc(x.Node, "node: its latest execution"))
		}
		out = append(out, x.Execution)
	}
	return out
}
