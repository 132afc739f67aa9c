package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cmdFlags is one command of the tree: its cobra command and flag set,
// and the name its messages go by ("run submit"). The command's Use is
// its synopsis (after its parent's path), its Long the paragraph about it,
// and its notes, printed after the flags, are an annotation of it: help
// (help.go) prints all of them from the tree.
type cmdFlags struct {
	*pflag.FlagSet
	cmd  *cobra.Command
	name string
}

// newFlags makes the cobra command of subcommand name ("run submit" is
// submit under run), whose synopsis starts with name.
func newFlags(name, synopsis, about string) *cmdFlags {
	cmd := &cobra.Command{
		Use:           strings.TrimPrefix(synopsis, name[:strings.LastIndex(name, " ")+1]),
		Long:          about,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	return &cmdFlags{FlagSet: cmd.Flags(), cmd: cmd, name: name}
}

// String is pflag's String, except that a one-letter name is also its
// shorthand (-f and --f), as the docs write them: -f GRAPH, -o json.
func (f *cmdFlags) String(name, value, usage string) *string {
	p := new(string)
	f.StringVar(p, name, value, usage)
	return p
}

// StringVar is String with the variable given.
func (f *cmdFlags) StringVar(p *string, name, value, usage string) {
	f.StringVarP(p, name, shorthand(name), value, usage)
}

// shorthand is the shorthand of a one-letter flag name ("" for a longer
// one).
func shorthand(name string) string {
	if len(name) == 1 {
		return name
	}
	return ""
}

// run makes body the command's action: it gets the positional arguments,
// the flags already parsed. It returns the command.
func (f *cmdFlags) run(body func(args []string) error) *cobra.Command {
	f.cmd.RunE = func(_ *cobra.Command, args []string) error { return body(args) }
	return f.cmd
}

// note adds a paragraph printed after the flags, its long lines wrapped.
func (f *cmdFlags) note(s string) {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = wrap(l, noteWidth)
	}
	addNote(f.cmd, strings.Join(lines, "\n"))
}

// noteWidth is the column at which usage notes are wrapped.
const noteWidth = 90

// wrap breaks s between words so that no line exceeds width (a longer
// word stays whole).
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		if i > 0 && n+1+len(w) > width {
			b.WriteByte('\n')
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// flagError is the text of a flag parsing error. An unknown flag reads as
// it always has: "flag provided but not defined: --bogus".
func flagError(err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return err.Error()
	}
	if sh := ne.GetSpecifiedShortnames(); sh != "" {
		return "flag provided but not defined: -" + ne.GetSpecifiedName()
	}
	return "flag provided but not defined: --" + ne.GetSpecifiedName()
}

// usageErr reports a usage problem (exit 2) with the hint to the help.
func (f *cmdFlags) usageErr(format string, a ...any) *exitErr {
	return usageErr(f.name, format, a...)
}

// usageErr is a usage problem (exit 2) of command name, with the hint to
// its help.
func usageErr(name, format string, a ...any) *exitErr {
	return failf(name, exitUsage, format, a...).hint(fmt.Sprintf("See 'oecp help %s'.", name))
}

// flagErr is the error of a flag that does not parse, for every command
// of the tree: one line and the hint to the command's help.
func flagErr(cmd *cobra.Command, err error) error {
	return usageErr(commandName(cmd), "%s", flagError(err))
}

// helpFlag is the flag cobra adds to every command; the usage lists it
// last, as -h, --help.
const helpFlag = "help"

// printFlags lists fs's flags as the docs write them: --name (one dash for
// one-letter names), the value's placeholder, then the help and default.
func printFlags(w io.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Name == helpFlag || fl.Hidden {
			return
		}
		placeholder, help := pflag.UnquoteUsage(fl)
		line := "  " + dashed(fl.Name)
		if placeholder != "" {
			line += " " + placeholder
		}
		if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "0s" && d != "[]" {
			if fl.Value.Type() == "string" {
				d = fmt.Sprintf("%q", d)
			}
			help += " (default " + d + ")"
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, strings.ReplaceAll(wrap(help, noteWidth-8), "\n", "\n        "))
	})
	fmt.Fprintf(w, "  -h, --help\n        print this help\n")
}

// dashed is a flag's name as typed: -f, --server.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
