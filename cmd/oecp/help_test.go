package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCLIHelpFromTheTree: every command of the tree has a summary, which
// its parent's usage lists; its own usage starts with its path and lists
// its flags, and is what `oecp help PATH` and `oecp PATH --help` print; the
// commands a group's usage lists are the ones completion offers. A group
// lists its commands in the order it was given them (run: submit first),
// the root alphabetically.
func TestCLIHelpFromTheTree(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	seen := 0
	var walk func(parent *cobra.Command)
	walk = func(parent *cobra.Command) {
		var usage bytes.Buffer
		writeHelp(&usage, parent)
		for _, cmd := range listed(parent) {
			seen++
			path := commandName(cmd)
			if cmd.Short == "" || !strings.Contains(usage.String(), " "+cmd.Name()+" ") || !strings.Contains(usage.String(), " "+cmd.Short+"\n") {
				t.Errorf("the usage of %q does not list %q with a summary:\n%s", parent.CommandPath(), path, usage.String())
			}
			var own bytes.Buffer
			writeHelp(&own, cmd)
			if !strings.HasPrefix(own.String(), "usage: oecp "+path) {
				t.Errorf("oecp %s: usage starts %q", path, strings.SplitN(own.String(), "\n", 2)[0])
			}
			cmd.Flags().VisitAll(func(f *pflag.Flag) {
				if !f.Hidden && !strings.Contains(own.String(), "  "+dashed(f.Name)) {
					t.Errorf("oecp %s: usage lacks %s:\n%s", path, dashed(f.Name), own.String())
				}
			})
			if cmd.Name() != "help" {
				args := strings.Fields(path)
				expect(t, oecp(t, nil, append([]string{"help"}, args...)...), 0, []string{own.String()}, nil)
				expect(t, oecp(t, nil, append(args, "--help")...), 0, []string{own.String()}, nil)
			}
			walk(cmd)
		}
		if parent.HasSubCommands() {
			args := append([]string{"__completeNoDesc"}, strings.Fields(commandName(parent))...)
			r := oecp(t, nil, append(args, "")...)
			got := strings.Fields(strings.TrimSuffix(strings.TrimSpace(r.stdout), ":4"))
			if want := names(listed(parent)); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
				t.Errorf("completion of %q offers %v; its usage lists %v", parent.CommandPath(), got, want)
			}
		}
	}
	walk(root)
	if seen < 30 {
		t.Fatalf("the tree has %d commands", seen)
	}
	if got := names(listed(subcommand(root, "run"))); got[0] != "submit" || got[len(got)-1] != "harnesses" {
		t.Errorf("oecp run lists %v", got)
	}
	if got := names(listed(root)); !slices.IsSorted(got) {
		t.Errorf("oecp lists %v", got)
	}
}

func names(cmds []*cobra.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name())
	}
	return out
}

// TestCLIGlobalFlagsBeforeEveryGroup: the connection flags may come before
// the command of any group, target's as run's and template's:
// `oecp --json target list` is `oecp target list --json`.
func TestCLIGlobalFlagsBeforeEveryGroup(t *testing.T) {
	env, _ := targetEnv(t)
	expect(t, runEnv(t, "", env, "target", "add", "dev", "--url", "ws://127.0.0.1:1/oecp"), 0, nil, nil)
	r := runEnv(t, "", env, "--json", "target", "list")
	var list []targetListing
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil || len(list) != 1 || list[0].Name != "dev" {
		t.Fatalf("oecp --json target list: %+v (%v)", r, err)
	}
	expect(t, runEnv(t, "", env, "--server", "ws://127.0.0.1:1/oecp", "target", "list"), 2, nil,
		[]string{"oecp target list: flag provided but not defined: --server", "See 'oecp help target list'."})
}
