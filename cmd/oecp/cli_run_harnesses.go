package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

func runHarnessesCmd(stdout, stderr io.Writer) *cobra.Command {
	c := newCLI("run harnesses", "run harnesses [-o json|yaml] [flags]",
		`Lists the harnesses the server offers native runs (its --harness file): each one's name
(what --harness takes), its kind (the codex or claude CLI, or a command), the model run
submit uses when --model gives none, and every model a node may name. Run submit without
--harness uses the server's harness when it offers exactly one (DEFAULT yes).`,
		stdout, stderr, false, false)
	c.addOutput()
	var r client.RunHarnessesResult
	return c.fs.run(func(args []string) error {
		if done, err := c.runCall(args, 0, protocol.MethodRunHarnesses, &r); done {
			return err
		}
		if len(r.Harnesses) == 0 {
			fmt.Fprintln(stdout, "the server offers no harness: its operator starts it with 'oecp serve --harness FILE'")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HARNESS\tKIND\tDEFAULT\tDEFAULT MODEL\tMODELS")
		for _, h := range r.Harnesses {
			def := "no"
			if h.Default {
				def = "yes"
			}
			fmt.Fprintln(tw, strings.Join([]string{h.Name, h.Kind, def, h.DefaultModel, strings.Join(h.Models, ", ")}, "\t"))
		}
		return tw.Flush()
	})
}

// offer is what the server said it offers for run/submit's runtime plan:
// its harness entries, asked once per command.
type offer struct {
	ask    func() (*client.RunHarnessesResult, error)
	asked  bool
	result *client.RunHarnessesResult // nil: the server predates run/harnesses
	err    error
}

// get asks the server once; a server without run/harnesses gives a nil
// result and no error.
func (o *offer) get() (*client.RunHarnessesResult, error) {
	if !o.asked {
		o.asked = true
		o.result, o.err = o.ask()
		if client.MethodNotFound(o.err) {
			o.result, o.err = nil, nil
		}
	}
	return o.result, o.err
}

func (o *offer) names() []string {
	var out []string
	for _, h := range o.result.Harnesses {
		out = append(out, h.Name)
	}
	slices.Sort(out)
	return out
}

// lazySession is run submit's session, opened on first use.
type lazySession struct {
	cli *cli
	s   *session
}

func (l *lazySession) get() (*session, error) {
	if l.s == nil {
		s, err := l.cli.open()
		if err != nil {
			return nil, err
		}
		l.s = s
	}
	return l.s, nil
}

func (l *lazySession) close() {
	if l.s != nil {
		l.s.close()
	}
}

// checked is the session once what tf builds the plan from is offered
// (checkOffered).
func (l *lazySession) checked(tf *taskFlags) (*session, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s, l.cli.checkOffered(tf)
}

// offer asks the server over the session, opening it.
func (l *lazySession) offer() *offer {
	return &offer{ask: func() (*client.RunHarnessesResult, error) {
		s, err := l.get()
		if err != nil {
			return nil, &dialError{err}
		}
		return s.conn.RunHarnesses(s.ctx)
	}}
}

// checkOffered refuses, before anything is submitted, a --harness and the
// --model values of a plan built here that the server does not offer.
func (c *cli) checkOffered(tf *taskFlags) error {
	if tf.harness == "" {
		return nil
	}
	if !tf.chosen {
		if err := c.checkHarness(tf.offer, tf.harness); err != nil {
			return err
		}
	}
	return c.checkModels(tf.offer, tf.harness, tf.models)
}

// chooseHarness is the harness of a plan built without --harness: the
// server's only entry. A server that offers several, or none, is an error
// naming what it offers and the flag to choose; one that predates
// run/harnesses gets the request for --runtime or --harness.
func (c *cli) chooseHarness(o *offer) (string, error) {
	if o == nil {
		return "", c.fs.usageErr("give the runtime plan with --runtime FILE, or build one with --harness codex|claude [--model M]")
	}
	res, err := o.get()
	var unasked *dialError
	switch {
	case errors.As(err, &unasked):
		return "", c.fs.usageErr("give the runtime plan with --runtime FILE, or build one with --harness codex|claude [--model M]").
			hint("Without either, run submit asks the server which harness it offers, and could not: " + unasked.short())
	case err != nil:
		return "", c.failed(err)
	case res == nil:
		return "", c.fs.usageErr("give the runtime plan with --runtime FILE, or build one with --harness codex|claude [--model M]")
	}
	switch names := o.names(); len(names) {
	case 0:
		return "", c.failf(exitError, "the server offers no harness, so it cannot run agents").
			hint("Its operator starts it with 'oecp serve --harness FILE'; or give a --runtime plan for a server that has one.")
	case 1:
		return names[0], nil
	default:
		return "", c.fs.usageErr("the server offers the harnesses %s: choose one with --harness NAME, or give the runtime plan with --runtime FILE", strings.Join(names, ", "))
	}
}

// checkHarness refuses, before anything is submitted, a --harness the
// server does not offer, naming what it offers; a server that predates
// run/harnesses is left to judge the plan itself.
func (c *cli) checkHarness(o *offer, name string) error {
	res, err := o.get()
	if err != nil {
		return c.failed(err)
	}
	if res == nil || slices.ContainsFunc(res.Harnesses, func(h client.RunHarness) bool { return h.Name == name }) {
		return nil
	}
	if len(res.Harnesses) == 0 {
		return c.failf(exitError, "--harness %s: the server offers no harness, so it cannot run agents", name).
			hint("Its operator starts it with 'oecp serve --harness FILE'.")
	}
	return c.failf(exitError, "--harness %s: the server does not offer it; it offers %s", name, strings.Join(o.names(), ", ")).
		hint("Choose one of those with --harness NAME, or ask the server's operator to add " + name + " to its --harness file.")
}

// dialError is a connection to the server that did not open when the
// command asked it what it offers.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// short is the first line of the error without the command's prefix.
func (e *dialError) short() string {
	line, _, _ := strings.Cut(strings.TrimSpace(e.err.Error()), "\n")
	_, rest, found := strings.Cut(line, ": ")
	if found && strings.HasPrefix(line, "oecp ") {
		return rest
	}
	return line
}

// checkModels refuses, before anything is submitted, a --model value
// naming a model the server's entry for name does not offer, naming what
// it offers; a server that predates run/harnesses is left to judge.
func (c *cli) checkModels(o *offer, name string, models []string) error {
	res, err := o.get()
	if err != nil || res == nil {
		return c.failedOrNil(err)
	}
	i := slices.IndexFunc(res.Harnesses, func(h client.RunHarness) bool { return h.Name == name })
	if i < 0 || len(res.Harnesses[i].Models) == 0 {
		return nil
	}
	offered := res.Harnesses[i].Models
	for _, v := range models {
		_, model, keyed := strings.Cut(v, "=")
		if !keyed {
			model = v
		}
		if !slices.Contains(offered, model) {
			return c.failf(exitError, "--model %s: the server's harness %s does not offer %q; it offers %s", v, name, model, strings.Join(offered, ", ")).
				hint("Choose one of those with --model, or leave --model out for " + res.Harnesses[i].DefaultModel + ".")
		}
	}
	return nil
}

// failedOrNil is failed for a non-nil err.
func (c *cli) failedOrNil(err error) error {
	if err == nil {
		return nil
	}
	return c.failed(err)
}

// failed is fail for an error that may already be the command's own (a
// connection that did not open).
func (c *cli) failed(err error) error {
	var e *exitErr
	if errors.As(err, &e) {
		return e
	}
	return c.fail(err)
}
