package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// targetGroupCmd is `oecp target <command>`: it keeps the named servers
// of the configuration file (target_config.go). It is local: nothing is
// dialled.
func targetGroupCmd(stdout, stderr io.Writer) *cobra.Command {
	return newGroup("target", "Named servers, kept in $XDG_CONFIG_HOME/oecp/config.yaml (else ~/.config/oecp/config.yaml).\n"+
		"Client commands go to --server, else $OECP_SERVER, else the current target, else the\n"+
		"default address; --token-file overrides the target's.",
		summary(targetAddCmd(stdout, stderr), "add a target: a server URL and, optionally, the file holding its token"),
		summary(targetUseCmd(stdout, stderr), "make a target the current one (--none: back to the default address)"),
		summary(targetListCmd(stdout, stderr), "list the targets, the current one marked"),
		summary(targetRemoveCmd(stdout, stderr), "remove a target"),
	)
}

// editConfig loads the configuration, lets change alter it and saves it;
// a change that fails saves nothing.
func editConfig(name string, stdout io.Writer, change func(cfg *clientConfig, path string) (string, error)) error {
	path, err := configPath()
	if err != nil {
		return failf(name, exitUsage, "%v", err)
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return failf(name, exitUsage, "%v", err)
	}
	said, err := change(cfg, path)
	if err != nil {
		return err
	}
	if err := cfg.save(path); err != nil {
		return failf(name, exitUsage, "%v", err)
	}
	fmt.Fprint(stdout, said)
	return nil
}

func targetAddCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("target add", "target add NAME --url URL [--token-file FILE] [--use]",
		"Adds a named server. The token is not copied: the target names the file that holds it,\nread each time a command uses the target.")
	u := fs.String("url", "", "server `URL`, ws:// or wss:// (required)")
	tokenFile := fs.String("token-file", "", "`FILE` holding the bearer token (kept as an absolute path)")
	use := fs.Bool("use", false, "make it the current target too")
	return fs.run(func(args []string) error {
		if len(args) != 1 {
			return fs.usageErr("give the target's NAME")
		}
		name := args[0]
		switch {
		case !targetNameRE.MatchString(name):
			return fs.usageErr("target name %q: want letters, digits, '.', '_' or '-' (at most 63, starting with a letter or digit)", name)
		case *u == "":
			return fs.usageErr("give the server's URL with --url")
		}
		if err := checkTargetURL(*u); err != nil {
			return fs.usageErr("--%v", err)
		}
		t := &target{URL: *u}
		if *tokenFile != "" {
			abs, err := readableTokenFile(*tokenFile)
			if err != nil {
				return fs.usageErr("--token-file: %v", err)
			}
			t.TokenFile = abs
		}
		return editConfig(fs.name, stdout, func(cfg *clientConfig, path string) (string, error) {
			if cfg.Targets[name] != nil {
				return "", failf(fs.name, exitUsage, "a target named %s exists already (in %s)", name, path).
					hint("Remove it first with oecp target remove " + name + ", or choose another name.")
			}
			if cfg.Targets == nil {
				cfg.Targets = map[string]*target{}
			}
			cfg.Targets[name] = t
			if *use {
				cfg.Current = name
			}
			said := fmt.Sprintf("added target %s: %s\n", name, t.URL)
			if !*use {
				said += fmt.Sprintf("use it with: oecp target use %s\n", name)
			}
			return said, nil
		})
	})
}

// readableTokenFile is path made absolute, once it is a readable file
// with a token in it.
func readableTokenFile(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", fmt.Errorf("%s is empty", abs)
	}
	return abs, nil
}

func targetUseCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("target use", "target use (NAME | --none)",
		"Makes NAME the current target: client commands without --server or $OECP_SERVER go\nthere. --none clears it: they go to the default address (and its local server) again.")
	none := fs.Bool("none", false, "clear the current target")
	fs.cmd.ValidArgsFunction = completeTargets
	return fs.run(func(args []string) error {
		switch {
		case *none && len(args) > 0:
			return fs.usageErr("give NAME or --none, not both")
		case !*none && len(args) != 1:
			return fs.usageErr("give the target's NAME (or --none)")
		}
		return editConfig(fs.name, stdout, func(cfg *clientConfig, _ string) (string, error) {
			if *none {
				cfg.Current = ""
				return "no current target: commands go to the default address\n", nil
			}
			t, err := cfg.lookup(args[0])
			if err != nil {
				return "", failf(fs.name, exitUsage, "%v", err)
			}
			cfg.Current = args[0]
			if os.Getenv("OECP_SERVER") != "" {
				fmt.Fprintf(stderr, "oecp %s: OECP_SERVER is set (%s): it takes precedence over the current target\n", fs.name, os.Getenv("OECP_SERVER"))
			}
			return fmt.Sprintf("current target: %s (%s)\n", args[0], t.URL), nil
		})
	})
}

func targetRemoveCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("target remove", "target remove NAME",
		"Removes a target (its token file is left alone). Removing the current one clears it.")
	fs.cmd.ValidArgsFunction = completeTargets
	return fs.run(func(args []string) error {
		if len(args) != 1 {
			return fs.usageErr("give the target's NAME")
		}
		return editConfig(fs.name, stdout, func(cfg *clientConfig, _ string) (string, error) {
			if _, err := cfg.lookup(args[0]); err != nil {
				return "", failf(fs.name, exitUsage, "%v", err)
			}
			delete(cfg.Targets, args[0])
			if cfg.Current == args[0] {
				cfg.Current = ""
			}
			return fmt.Sprintf("removed target %s\n", args[0]), nil
		})
	})
}

func targetListCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("target list", "target list [--json]",
		"Lists the targets: name, URL and token file, the current one marked with *.")
	asJSON := fs.Bool("json", false, "print the list as one JSON array")
	return fs.run(func(args []string) error {
		if len(args) > 0 {
			return fs.usageErr("unexpected argument %q", args[0])
		}
		path, err := configPath()
		if err != nil {
			return failf(fs.name, exitUsage, "%v", err)
		}
		cfg, err := loadConfig(path)
		if err != nil {
			return failf(fs.name, exitUsage, "%v", err)
		}
		list := cfg.sortedTargets()
		if *asJSON {
			b, _ := json.MarshalIndent(list, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return nil
		}
		if len(list) == 0 {
			fmt.Fprintf(stdout, "no targets (in %s): add one with oecp target add NAME --url URL\n", path)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tURL\tTOKEN FILE")
		for _, t := range list {
			mark := ""
			if t.Current {
				mark = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, t.Name, t.URL, t.TokenFile)
		}
		return tw.Flush()
	})
}

// completeTargets completes a target name with the configured ones.
func completeTargets(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	path, err := configPath()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, t := range cfg.sortedTargets() {
		out = append(out, cobra.CompletionWithDesc(t.Name, t.URL))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
