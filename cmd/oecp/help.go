package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// The help of every command is printed from the command tree: a command's
// Use is its synopsis, its Short the line the lists show, its Long the
// paragraph about it, its flags the ones cobra parses, and these
// annotations the rest.
const (
	// notesAnnotation holds the paragraphs printed after a command's flags.
	notesAnnotation = "oecp/notes"
	// orderAnnotation is the order in which a group lists its commands
	// (their names, space-separated); without it a list is alphabetical.
	orderAnnotation = "oecp/order"
)

// addNote adds a paragraph printed after cmd's flags.
func addNote(cmd *cobra.Command, note string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	if prev := cmd.Annotations[notesAnnotation]; prev != "" {
		note = prev + "\n\n" + note
	}
	cmd.Annotations[notesAnnotation] = note
}

// summary sets cmd's Short, the line the lists of commands show.
func summary(cmd *cobra.Command, short string) *cobra.Command {
	cmd.Short = short
	return cmd
}

// printHelp is the help function of the whole tree (-h, --help, oecp help
// CMD): cmd's usage on its standard output.
func printHelp(cmd *cobra.Command, _ []string) { writeHelp(cmd.OutOrStdout(), cmd) }

// writeHelp writes cmd's usage: a group's lists its commands, a command's
// its flags.
func writeHelp(w io.Writer, cmd *cobra.Command) {
	if cmd.HasSubCommands() {
		writeGroupHelp(w, cmd)
		return
	}
	fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", useLine(cmd), cmd.Long)
	printFlags(w, cmd.Flags())
	if notes := cmd.Annotations[notesAnnotation]; notes != "" {
		fmt.Fprintf(w, "\n%s\n", notes)
	}
}

// writeGroupHelp writes the usage of the root or a group: its commands,
// each with its summary, then where their own usage is.
func writeGroupHelp(w io.Writer, cmd *cobra.Command) {
	fmt.Fprintf(w, "usage: %s\n\n", useLine(cmd))
	if cmd.Long != "" {
		fmt.Fprint(w, cmd.Long+" ")
	}
	fmt.Fprintln(w, "commands:")
	subs := listed(cmd)
	pad := 0
	for _, s := range subs {
		pad = max(pad, len(s.Name()))
	}
	for _, s := range subs {
		fmt.Fprintf(w, "  %-*s %s\n", pad, s.Name(), s.Short)
	}
	fmt.Fprintln(w)
	if cmd.HasParent() {
		path := commandName(cmd)
		fmt.Fprintf(w, "Run 'oecp help %s <command>' (or 'oecp %s <command> --help') for a command's flags.\n", path, path)
		return
	}
	fmt.Fprintln(w, "The connection flags "+globalFlagList()+" may also come before the command.")
	fmt.Fprintln(w, "Run 'oecp help <command>' (or 'oecp <command> --help') for a command's flags;")
	fmt.Fprintln(w, "'oecp --version' prints the version.")
}

// useLine is cmd's synopsis after its parent's path: "oecp run submit …".
func useLine(cmd *cobra.Command) string {
	if cmd.HasParent() {
		return cmd.Parent().CommandPath() + " " + cmd.Use
	}
	return cmd.Use
}

// commandName is cmd's path after "oecp ": "run submit".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
}

// listed are the commands cmd lists (cobra's hidden ones left out): in
// the group's order when it has one, else alphabetically.
func listed(cmd *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range cmd.Commands() {
		if !s.Hidden {
			out = append(out, s)
		}
	}
	if order := strings.Fields(cmd.Annotations[orderAnnotation]); len(order) > 0 {
		slices.SortStableFunc(out, func(a, b *cobra.Command) int {
			return slices.Index(order, a.Name()) - slices.Index(order, b.Name())
		})
	}
	return out
}

// subcommand is the command of parent named name that it lists (nil:
// none).
func subcommand(parent *cobra.Command, name string) *cobra.Command {
	for _, s := range listed(parent) {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// newGroup is the group `oecp NAME <command>` of the commands subs, listed
// in that order; about leads its list of commands. It parses no flags
// itself: with no command it prints its usage on stderr (exit 2); -h,
// --help and help print it on stdout; an unknown command is a usage error.
func newGroup(name, about string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:                name + " <command> [flags]",
		Long:               about,
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
	}
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			writeHelp(cmd.ErrOrStderr(), cmd)
			return exitWith(exitUsage)
		}
		switch args[0] {
		case "-h", "--help", "help":
			writeHelp(cmd.OutOrStdout(), cmd)
			return nil
		}
		return groupUnknown(cmd, args[0])
	}
	var order []string
	for _, s := range subs {
		order = append(order, s.Name())
	}
	cmd.Annotations = map[string]string{orderAnnotation: strings.Join(order, " ")}
	cmd.AddCommand(subs...)
	return cmd
}

// groupUnknown is the error of `oecp GROUP NAME` for an unknown NAME.
func groupUnknown(group *cobra.Command, name string) error {
	return didYouMean(failf(group.Name(), exitUsage, "unknown command %q", name), group, name).
		hint("Run 'oecp " + group.Name() + " --help' for the list of commands.")
}

// helpCmd is `oecp help [CMD [SUBCMD]]`: the usage of oecp, or of the named
// command, on stdout.
func helpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help",
		Short: "print the usage of oecp, or of one command (oecp help CMD)",
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, s := range listed(root) {
				names = append(names, s.Name())
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		RunE:               func(_ *cobra.Command, args []string) error { return help(root, args) },
	}
}

// help prints the usage that `oecp help ARGS…` asks for.
func help(root *cobra.Command, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		writeHelp(root.OutOrStdout(), root)
		return nil
	}
	cmd := subcommand(root, args[0])
	switch {
	case len(args) > 2 || (len(args) == 2 && (cmd == nil || !cmd.HasSubCommands())):
		return failf("help", exitUsage, "give at most one command name (or %s and one of its commands)", groupNames(root))
	case cmd == nil:
		return didYouMean(failf("help", exitUsage, "unknown command %q", args[0]), root, args[0]).hint("Run 'oecp help' for the list of commands.")
	case cmd.Name() == "help":
		cmd = root
	case len(args) == 2:
		if cmd = subcommand(cmd, args[1]); cmd == nil {
			// `help run nope`: the group's own answer to an unknown command.
			return groupUnknown(subcommand(root, args[0]), args[1])
		}
	}
	writeHelp(root.OutOrStdout(), cmd)
	return nil
}

// groupNames names the groups of root: "run, target or template".
func groupNames(root *cobra.Command) string {
	var names []string
	for _, s := range listed(root) {
		if s.HasSubCommands() {
			names = append(names, s.Name())
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
