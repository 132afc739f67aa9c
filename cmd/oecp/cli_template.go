package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/templates"
	"github.com/spf13/cobra"
)

// templateGroupCmd is `oecp template <command>`: it lists the built-in
// graphs and prints one as a GraphSpec. It is local: a template is
// materialised by the client, never by the server.
func templateGroupCmd(stdout, stderr io.Writer) *cobra.Command {
	return newGroup("template", "Built-in graphs, which 'oecp run submit --template NAME --task TEXT' runs. Nothing is\ndialled: the client materialises a template into an ordinary GraphSpec.",
		summary(templateListCmd(stdout, stderr), "list the built-in graphs: name, what each does, its agent nodes and deliveries"),
		summary(templateShowCmd(stdout, stderr), "print a built-in graph as a GraphSpec (JSON), to copy, change and run with -f"),
	)
}

// templateListing is one template as `template list --json` prints it.
type templateListing struct {
	Name       string   `json:"name"`
	Summary    string   `json:"summary"`
	Deliveries []string `json:"deliveries"`
	// Agents are the agent nodes of the graph without delivery; Delivery
	// the nodes a delivery adds (its git delivery node included).
	Agents   []string            `json:"agents"`
	Delivery map[string][]string `json:"delivery,omitempty"`
}

func templateListCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("template list", "template list [--json]",
		"Lists the built-in graphs: each one's name, what it does, its agent nodes (the names a\nruntime plan and --model NODE=M bind) and the deliveries it takes (--pr, --ship).")
	asJSON := fs.Bool("json", false, "print the list as one JSON array")
	return fs.run(func(args []string) error {
		if len(args) > 0 {
			return fs.usageErr("unexpected argument %q", args[0])
		}
		var out []templateListing
		for _, t := range templates.List() {
			l := templateListing{Name: t.Name, Summary: t.Summary, Deliveries: []string{}}
			g, _ := t.Graph(templates.DeliveryNone)
			l.Agents = nodeNames(g)
			for _, d := range t.Deliveries {
				l.Deliveries = append(l.Deliveries, string(d))
				dg, _ := t.Graph(d)
				if l.Delivery == nil {
					l.Delivery = map[string][]string{}
				}
				l.Delivery[string(d)] = slices.DeleteFunc(nodeNames(dg), func(n string) bool { return slices.Contains(l.Agents, n) })
			}
			out = append(out, l)
		}
		if *asJSON {
			b, _ := json.Marshal(out)
			fmt.Fprintf(stdout, "%s\n", b)
			return nil
		}
		for i, l := range out {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "%s\n", l.Name)
			fmt.Fprintf(stdout, "  %s\n", wrapIndented(l.Summary, "  "))
			fmt.Fprintf(stdout, "  agent nodes: %s\n", strings.Join(l.Agents, ", "))
			if len(l.Deliveries) == 0 {
				fmt.Fprintln(stdout, "  delivery:    none (refuses --pr and --ship)")
				continue
			}
			for _, d := range l.Deliveries {
				fmt.Fprintf(stdout, "  --%-10s %s\n", d+":", deliveryWords(templates.Delivery(d), l.Delivery[d]))
			}
		}
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "Run one: oecp run submit --template NAME --task TEXT|@FILE --harness codex|claude [--pr|--ship]")
		fmt.Fprintln(stdout, "Change one: oecp template show NAME [--pr|--ship] > graph.json, edit it, oecp plan -f graph.json")
		return nil
	})
}

// deliveryWords says what a delivery does and the nodes it adds.
func deliveryWords(d templates.Delivery, nodes []string) string {
	what := "opens a pull request into the source branch"
	if d == templates.DeliveryShip {
		what = "opens a pull request and merges it once its checks pass"
	}
	return what + " (adds " + strings.Join(nodes, ", ") + ")"
}

// wrapIndented wraps s at the usage width, continuing lines with indent.
func wrapIndented(s, indent string) string {
	return strings.ReplaceAll(wrap(s, noteWidth-len(indent)), "\n", "\n"+indent)
}

// nodeNames are g's executables (agent and delivery nodes) in authored
// order.
func nodeNames(g *graph.GraphSpec) []string {
	var out []string
	graph.Walk(g, func(n graph.Node, _ graph.Path, _ int) bool {
		if k := n.NodeKind(); k == graph.KindStep || k == graph.KindVerifier {
			out = append(out, n.NodeName())
		}
		return true
	})
	return out
}

// deliveryFlags are --pr and --ship, which choose a template's delivery.
type deliveryFlags struct{ pr, ship bool }

// addDeliveryFlags adds --pr and --ship, their help led by prefix.
func addDeliveryFlags(fs *cmdFlags, prefix string) *deliveryFlags {
	d := &deliveryFlags{}
	fs.BoolVar(&d.pr, "pr", false, prefix+"deliver the accepted change as a pull request into the source branch")
	fs.BoolVar(&d.ship, "ship", false, prefix+"deliver the accepted change as a pull request, merged once its checks pass")
	return d
}

// delivery is the delivery the flags choose.
func (d *deliveryFlags) delivery(fs *cmdFlags) (templates.Delivery, error) {
	switch {
	case d.pr && d.ship:
		return "", fs.usageErr("--pr and --ship exclude each other: --pr opens a pull request, --ship also merges it")
	case d.pr:
		return templates.DeliveryPR, nil
	case d.ship:
		return templates.DeliveryShip, nil
	}
	return templates.DeliveryNone, nil
}

// given reports whether --pr or --ship was given.
func (d *deliveryFlags) given() bool { return d.pr || d.ship }

// materialise is the template name with delivery d, as GraphSpec JSON; a
// name or delivery the catalogue refuses is a usage error of fs.
func materialise(fs *cmdFlags, name string, d templates.Delivery) (json.RawMessage, error) {
	see := fmt.Sprintf("See 'oecp help %s'.", fs.name)
	t, err := templates.Lookup(name)
	if err != nil {
		return nil, failf(fs.name, exitUsage, "%v", err).hint("'oecp template list' says what each does.").hint(see)
	}
	data, err := t.JSON(d)
	if errors.Is(err, templates.ErrNoDelivery) {
		return nil, failf(fs.name, exitUsage, "%v", err).
			hint(templates.SoftwareChange + " delivers: it has the change reviewed, then opens (--pr) or merges (--ship) a pull request.").hint(see)
	}
	return data, err
}

// completeTemplates completes a template name.
func completeTemplates(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	var names []string
	for _, t := range templates.List() {
		names = append(names, t.Name+"\t"+t.Summary)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func templateShowCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("template show", "template show NAME [--pr | --ship]",
		`Prints the built-in graph NAME as a GraphSpec (indented JSON): the graph 'oecp run submit
--template NAME' submits, to copy and change. Check a changed copy with 'oecp plan -f FILE',
then run it with 'oecp run submit -f FILE --task TEXT|@FILE': --task fills the graph's task
field and seeds its other string fields empty, as for a template.`)
	df := addDeliveryFlags(fs, "")
	fs.cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeTemplates(cmd, args, s)
	}
	return fs.run(func(args []string) error {
		if len(args) != 1 {
			return fs.usageErr("give one template NAME ('oecp template list' lists them)")
		}
		d, err := df.delivery(fs)
		if err != nil {
			return err
		}
		data, err := materialise(fs, args[0], d)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err != nil {
			return failf(fs.name, exitError, "%v", err)
		}
		fmt.Fprintf(stdout, "%s\n", out.Bytes())
		return nil
	})
}
