package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cmdFlags is one subcommand's flag set and the text of its usage: the
// synopsis (after "oecp "), a paragraph about it, and notes printed after
// the flags.
type cmdFlags struct {
	*flag.FlagSet
	name, synopsis, about string
	notes                 []string
	stdout, stderr        io.Writer
}

func newFlags(name, synopsis, about string, stdout, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse reports errors itself, on one line
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, name: name, synopsis: synopsis, about: about, stdout: stdout, stderr: stderr}
}

// note adds a paragraph printed after the flags, its long lines wrapped.
func (f *cmdFlags) note(s string) {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = wrap(l, noteWidth)
	}
	f.notes = append(f.notes, strings.Join(lines, "\n"))
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

// usage writes the command's whole usage.
func (f *cmdFlags) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: oecp %s\n\n%s\n\nflags:\n", f.synopsis, f.about)
	printFlags(w, f.FlagSet)
	for _, n := range f.notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
}

// parse parses args. --help prints the usage on stdout and returns
// flag.ErrHelp (exit 0); a bad flag prints one line and the hint
// `oecp help CMD` on stderr and exits 2.
func (f *cmdFlags) parse(args []string) error {
	err := f.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		f.usage(f.stdout)
		return err
	}
	return f.usageErr("%v", err)
}

// usageErr reports a usage problem (exit 2) with the hint to the help.
func (f *cmdFlags) usageErr(format string, a ...any) *exitErr {
	return failf(f.name, exitUsage, format, a...).hint(fmt.Sprintf("See 'oecp help %s'.", f.name))
}

// printFlags lists fs's flags as the docs write them: --name (one dash for
// one-letter names), the value's placeholder, then the help and default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(fl *flag.Flag) {
		placeholder, help := flag.UnquoteUsage(fl)
		line := "  " + dashed(fl.Name)
		if placeholder != "" {
			line += " " + placeholder
		}
		if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "0s" {
			if g, ok := fl.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					d = fmt.Sprintf("%q", d)
				}
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
