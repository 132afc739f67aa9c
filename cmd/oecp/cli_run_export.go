package main

import (
	"errors"
	"io"
	"os"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/runs/export"
	"github.com/spf13/cobra"
)

func runExportCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run export", "run export ID [--format trace|semantic] [--output FILE] [flags]",
		`Exports a run as JSONL, streamed from the server (HTTP on its listener, with the same
token as every command). trace: the run's ledger, the exact prompt of every agent
process and every byte it wrote; semantic: the agents' output parsed into text,
thinking, tool_call, tool_result, result and usage events. Both end with a footer
saying whether the evidence is complete and what is missing. The same finished run
always exports to the same bytes; a run still going is exported as far as it got
(complete: false). --output writes a new FILE and never replaces an existing one.`,
		stdout, stderr, false, false)
	format := c.fs.String("format", "trace", "export `FORMAT`: trace or semantic")
	output := c.fs.String("output", "", "write to `FILE`, which must not exist (default: stdout)")
	c.fs.cmd.ValidArgsFunction = c.completeRunIDs(1)
	_ = c.fs.cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"trace", "semantic"}, cobra.ShellCompDirectiveNoFileComp))
	return c.fs.run(func(args []string) error {
		if err := c.parse(args, 1, 1); err != nil {
			return err
		}
		return c.export(c.args[0], *format, *output)
	})
}

// export streams run runID's export in format to stdout or a new file.
func (c *cli) export(runID, format, output string) error {
	if format != "trace" && format != "semantic" {
		return c.fs.usageErr("--format %q: want trace or semantic", format)
	}
	opts, err := c.dialOptions()
	if err != nil {
		return c.usageErr("%v", err)
	}
	w, finish, err := exportTarget(c, output, c.stdout)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	if err := c.ensureServer(ctx); err != nil {
		return err
	}
	tail := export.NewTail()
	err = client.Export(ctx, c.server, opts, runID, format, io.MultiWriter(w, tail))
	if err == nil && !tail.Ended() {
		err = errors.New("export: the stream ended before its footer")
	}
	if err := finish(err == nil); err != nil {
		return c.failf(exitError, "%v", err)
	}
	return c.exportFailure(runID, err)
}

// exportTarget opens where the export goes: stdout, or a new file created
// exclusively (an existing one is an error and is left untouched). finish
// closes it and, when the export failed, removes the file it created.
func exportTarget(c *cli, path string, stdout io.Writer) (io.Writer, func(ok bool) error, error) {
	if path == "" {
		return stdout, func(bool) error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, nil, c.failf(exitError, "--output %s already exists: it was left untouched (choose a new file)", path)
	}
	if err != nil {
		return nil, nil, c.failf(exitError, "--output: %v", err)
	}
	return f, func(ok bool) error {
		err := f.Close()
		if !ok || err != nil {
			_ = os.Remove(path)
		}
		return err
	}, nil
}

// exportFailure explains a failed export.
func (c *cli) exportFailure(runID string, err error) error {
	var ee *client.ExportError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.Code == "NOT_FOUND":
		return c.failf(exitError, "run %s was not found", runID).hint("Check the id with 'oecp run list' (another tenant's runs are not visible).")
	case errors.As(err, &ee) && ee.Code == "GONE":
		return c.failf(exitError, "run %s is gone: retention deleted its history (oecp serve --retain)", runID)
	case errors.As(err, &ee) && ee.Code == "UNAUTHORIZED":
		return c.failf(exitUsage, "the server refused the token: %s", ee.Message).hint("Pass a valid token with --token-file FILE or OECP_TOKEN.")
	case errors.As(err, &ee):
		return c.failf(exitError, "%s (%s)", ee.Message, ee.Code)
	}
	var ue *localError
	if errors.As(err, &ue) || errors.Is(err, client.ErrURLRefused) {
		return c.usageErr("%v", err)
	}
	return c.failf(exitError, "%v", err)
}
