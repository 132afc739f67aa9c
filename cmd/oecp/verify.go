package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/verifier"
	"github.com/spf13/cobra"
)

// decodeRegistry decodes a --registry file: a registry table (the
// registry.json layout, a JSON object), or the workers file of `oecp serve
// --workers` (a JSON array), which verifies as that server would: the
// built-in workers and the file's.
func decodeRegistry(data []byte) (verifier.Registry, error) {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '[' {
		return verifier.LoadStaticRegistry(data)
	}
	specs, err := worker.ParseCommandSpecs(data)
	if err != nil {
		return nil, err
	}
	reg, _, err := capsule.Registries(specs)
	return reg, err
}

func verifyCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("verify", "verify (--graph FILE [--registry FILE] | --worker FILE) [--json]",
		`Verifies a graph offline with the server's verifier (the built-in workers, or the
workers of --registry), or validates a worker descriptor. Nothing is dialled.`)
	fs.note("Exit status: 0 verified (valid); 1 rejected (invalid); 2 unreadable input or bad usage.")
	graphFile := fs.String("graph", "", "GraphSpec JSON `FILE` to verify")
	registryFile := fs.String("registry", "", "worker registry `FILE`: a registry table (registry.json layout) or the workers file of serve --workers; default: the built-in workers")
	workerFile := fs.String("worker", "", "worker descriptor JSON `FILE` to validate")
	asJSON := fs.Bool("json", false, "print exactly one JSON document")
	return fs.run(func(args []string) error {
		if len(args) > 0 || (*graphFile == "") == (*workerFile == "") || (*workerFile != "" && *registryFile != "") {
			return fs.usageErr("bad usage: give --graph FILE (optionally with --registry FILE) or --worker FILE")
		}
		if *workerFile != "" {
			return verifyWorker(*workerFile, *asJSON, stdout)
		}
		return verifyGraph(*graphFile, *registryFile, *asJSON, stdout)
	})
}

func verifyGraph(graphFile, registryFile string, asJSON bool, stdout io.Writer) error {
	g, err := readDecoded(graphFile, "graph", "a valid GraphSpec", graph.Decode)
	if err != nil {
		return err
	}
	var reg verifier.Registry = verifier.BuiltinRegistry{}
	if registryFile != "" {
		if reg, err = readDecoded(registryFile, "registry", "a valid registry or workers file", decodeRegistry); err != nil {
			return err
		}
	}
	res := verifier.New(reg).Verify(g)
	if asJSON {
		out, err := json.Marshal(res)
		if err != nil {
			return failf("verify", exitError, "%v", err)
		}
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		writeReport(stdout, graphFile, res)
	}
	if res.OK() {
		return nil
	}
	return exitWith(exitError)
}

// readDecoded reads file (a what) and decodes it; either failure exits 2,
// saying the file is not valid.
func readDecoded[T any](file, what, valid string, decode func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(file)
	if err != nil {
		return zero, failf("verify", exitUsage, "cannot read %s %s: %v", what, file, err)
	}
	if err := jsonSyntax(data); err != nil {
		return zero, failf("verify", exitUsage, "%s is not valid JSON: %v", file, err)
	}
	v, err := decode(data)
	if err != nil {
		return zero, failf("verify", exitUsage, "%s is not %s: %v", file, valid, err)
	}
	return v, nil
}

func formatPath(p graph.Path) string {
	var b strings.Builder
	for _, s := range p {
		switch s.Kind {
		case graph.SegmentIndex:
			fmt.Fprintf(&b, "[%d]", s.Index)
		case graph.SegmentNode:
			fmt.Fprintf(&b, "<%s>", s.Name)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		}
	}
	return b.String()
}

func writeReport(w io.Writer, file string, res verifier.Result) {
	if res.OK() {
		b := res.Bounds
		fmt.Fprintf(w, "%s: verified\n", file)
		if b != nil {
			fmt.Fprintf(w, "  termination:        %s\n", b.Termination.Kind)
			fmt.Fprintf(w, "  maxNodeExecutions:  %d\n", b.MaxNodeExecutions)
			fmt.Fprintf(w, "  peakConcurrency:    %d\n", b.PeakConcurrency)
			fmt.Fprintf(w, "  executables:        %d\n", len(b.AttemptsPerNode))
		}
		return
	}
	fmt.Fprintf(w, "%s: rejected (%d diagnostic(s))\n", file, len(res.Diagnostics))
	for _, d := range res.Diagnostics {
		fmt.Fprintf(w, "  %s %s at %s: %s", d.Severity, d.Code, formatPath(d.Path), d.Message)
		if len(d.RelatedNodes) > 0 {
			fmt.Fprintf(w, " (nodes: %s)", strings.Join(d.RelatedNodes, ", "))
		}
		fmt.Fprintln(w)
	}
}

func verifyWorker(file string, asJSON bool, stdout io.Writer) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return failf("verify", exitUsage, "cannot read worker descriptor %s: %v", file, err)
	}
	if !json.Valid(data) {
		return failf("verify", exitUsage, "%s is not valid JSON", file)
	}
	d, err := verifier.ParseDescriptor(data)
	if err == nil {
		err = d.Validate()
	}
	var de *verifier.DescriptorError
	if err != nil && !errors.As(err, &de) {
		de = &verifier.DescriptorError{Code: verifier.CodeMalformedDescriptor, Reason: err.Error()}
	}
	if asJSON {
		type report struct {
			Valid  bool   `json:"valid"`
			Worker string `json:"worker,omitempty"`
			Code   string `json:"code,omitempty"`
			Reason string `json:"reason,omitempty"`
		}
		r := report{Valid: de == nil}
		if d != nil {
			r.Worker = d.Worker
		}
		if de != nil {
			r.Code, r.Reason = string(de.Code), de.Reason
		}
		out, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s\n", out)
	} else if de == nil {
		fmt.Fprintf(stdout, "%s: valid worker descriptor %s\n", file, d.Worker)
	} else {
		fmt.Fprintf(stdout, "%s: invalid worker descriptor: %s (%s)\n", file, de.Reason, de.Code)
	}
	if de != nil {
		return exitWith(exitError)
	}
	return nil
}
