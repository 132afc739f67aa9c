package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/oecp/oecp/graph"
)

// Limits of command workers.
const (
	// DefaultMaxOutputBytes bounds a command's stdout when the spec says
	// nothing; more is a malformed result.
	DefaultMaxOutputBytes = 1 << 20
	// MaxOutputBytesCeiling is the largest maxOutputBytes a spec may ask.
	MaxOutputBytesCeiling = 64 << 20
	// maxStderrLine bounds one stderr line read into memory.
	maxStderrLine = 64 << 10
)

// CommandSpec is one entry of the host's --workers file.
type CommandSpec struct {
	Worker         string              `json:"worker"`
	Kind           string              `json:"kind"`
	Input          json.RawMessage     `json:"input"`
	Output         json.RawMessage     `json:"output"`
	Signals        map[string][]string `json:"signals,omitempty"`
	Diagnostic     json.RawMessage     `json:"diagnostic,omitempty"`
	Argv           []string            `json:"argv"`
	Env            []string            `json:"env,omitempty"`
	Workdir        string              `json:"workdir,omitempty"`
	MaxOutputBytes int64               `json:"maxOutputBytes,omitempty"`
	parsed         *parsedTypes
}

type parsedTypes struct {
	input, output, diagnostic graph.PayloadType
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ErrInvalidWorkers wraps every problem of a workers file.
var ErrInvalidWorkers = errors.New("invalid workers file")

// LoadCommandSpecs reads and validates a --workers file.
func LoadCommandSpecs(path string) ([]CommandSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workers file: %w", err)
	}
	specs, err := ParseCommandSpecs(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return specs, nil
}

// ParseCommandSpecs validates the workers file format: a JSON array of
// closed objects.
func ParseCommandSpecs(data []byte) ([]CommandSpec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var specs []CommandSpec
	if err := dec.Decode(&specs); err != nil {
		return nil, fmt.Errorf("%w: want a JSON array of worker objects: %v", ErrInvalidWorkers, err)
	}
	seen := map[string]bool{}
	for i := range specs {
		s := &specs[i]
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("%w: entry %d (%s): %v", ErrInvalidWorkers, i, s.Worker, err)
		}
		if seen[s.Worker] {
			return nil, fmt.Errorf("%w: entry %d: worker %s is declared twice", ErrInvalidWorkers, i, s.Worker)
		}
		if strings.HasPrefix(s.Worker, "builtin.") {
			return nil, fmt.Errorf("%w: entry %d: the builtin.* names are reserved", ErrInvalidWorkers, i)
		}
		seen[s.Worker] = true
	}
	return specs, nil
}

func (s *CommandSpec) validate() error {
	if !graph.IsStableRef(s.Worker) {
		return fmt.Errorf("worker %q is not a name@version reference", s.Worker)
	}
	if s.Kind != "step" && s.Kind != "verifier" {
		return fmt.Errorf("kind %q: want step or verifier", s.Kind)
	}
	p := &parsedTypes{}
	var err error
	if p.input, err = graph.DecodePayloadType(s.Input); err != nil {
		return fmt.Errorf("input: %v", err)
	}
	if p.output, err = graph.DecodePayloadType(s.Output); err != nil {
		return fmt.Errorf("output: %v", err)
	}
	if s.Kind == "verifier" {
		if len(s.Signals) == 0 {
			return errors.New("a verifier declares signals")
		}
		for f, labels := range s.Signals {
			if !graph.IsIdentifier(f) || len(labels) == 0 {
				return fmt.Errorf("signal %q needs an identifier name and at least one label", f)
			}
			for _, l := range labels {
				if !graph.IsIdentifier(l) {
					return fmt.Errorf("signal %q: label %q is not an identifier", f, l)
				}
			}
		}
		if len(s.Diagnostic) == 0 {
			s.Diagnostic = json.RawMessage(`{"kind":"null"}`)
		}
		if p.diagnostic, err = graph.DecodePayloadType(s.Diagnostic); err != nil {
			return fmt.Errorf("diagnostic: %v", err)
		}
	} else if len(s.Signals) > 0 || len(s.Diagnostic) > 0 {
		return errors.New("signals and diagnostic belong to verifiers")
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("argv needs at least the program")
	}
	for _, e := range s.Env {
		if !envName.MatchString(e) {
			return fmt.Errorf("env %q is not a variable name", e)
		}
	}
	if s.Workdir != "" {
		st, err := os.Stat(s.Workdir)
		if err != nil || !st.IsDir() {
			return fmt.Errorf("workdir %q is not a directory", s.Workdir)
		}
	}
	if s.MaxOutputBytes < 0 || s.MaxOutputBytes > MaxOutputBytesCeiling {
		return fmt.Errorf("maxOutputBytes must be 1..%d", MaxOutputBytesCeiling)
	}
	if s.MaxOutputBytes == 0 {
		s.MaxOutputBytes = DefaultMaxOutputBytes
	}
	s.parsed = p
	return nil
}

// InputType, OutputType and DiagnosticType are the declared payload types.
func (s *CommandSpec) InputType() graph.PayloadType      { return s.parsed.input }
func (s *CommandSpec) OutputType() graph.PayloadType     { return s.parsed.output }
func (s *CommandSpec) DiagnosticType() graph.PayloadType { return s.parsed.diagnostic }

// Command is a host-configured command worker. Each execution starts argv
// in its own process group with only the listed environment variables,
// writes the input JSON to stdin, and reads the result JSON from stdout;
// every stderr line becomes a log record and live attach output.
type Command struct {
	Spec CommandSpec
}

// NewCommand returns the worker for a validated spec.
func NewCommand(spec CommandSpec) *Command { return &Command{Spec: spec} }

// Run executes the command once. The process ends the execution when it
// exits: a background child it left behind is killed with its group and
// cannot hold the step until its timeout. Output past MaxOutputBytes kills
// the group at once and settles as malformed.
func (c *Command) Run(ctx context.Context, ex Execution) Outcome {
	res := Process{
		Argv:      c.Spec.Argv,
		Dir:       c.Spec.Workdir,
		Env:       EnvFrom(c.Spec.Env),
		Stdin:     append(append([]byte{}, ex.Input...), '\n'),
		MaxStdout: c.Spec.MaxOutputBytes,
		Sinks:     ex.Sinks,
		Started:   ex.Started,
	}.Run(ctx)
	switch {
	case res.StartErr != nil:
		if ex.Sinks.Log != nil {
			ex.Sinks.Log("error", "worker could not start: "+res.StartErr.Error())
		}
		return Failed(CodeCrash, ReasonDeclaredFailure)
	case res.Cancelled:
		return Failed(CodeTimeout, ReasonDeclaredFailure)
	case res.Overflow:
		return Failed(CodeMalformed, ReasonMalformedResult)
	case res.Exit != nil:
		return Failed(CodeCrash, ReasonDeclaredFailure)
	}
	return c.parse(res.Stdout)
}

// parse turns stdout into an outcome: a step's output value, or a
// verifier's {output, signals, diagnostic}. Anything else is malformed.
func (c *Command) parse(out []byte) Outcome {
	out = bytes.TrimSpace(out)
	malformed := Failed(CodeMalformed, ReasonMalformedResult)
	if !json.Valid(out) {
		return malformed
	}
	if c.Spec.Kind == "step" {
		if c.Spec.parsed.output.Validate(out) != nil {
			return malformed
		}
		return Outcome{Status: "verified", Output: out}
	}
	var v struct {
		Output     json.RawMessage   `json:"output"`
		Signals    map[string]string `json:"signals"`
		Diagnostic json.RawMessage   `json:"diagnostic"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return malformed
	}
	if len(v.Output) == 0 {
		v.Output = json.RawMessage("null")
	}
	if len(v.Diagnostic) == 0 {
		v.Diagnostic = json.RawMessage("null")
	}
	if c.Spec.parsed.output.Validate(v.Output) != nil || c.Spec.parsed.diagnostic.Validate(v.Diagnostic) != nil {
		return malformed
	}
	for field, labels := range c.Spec.Signals {
		got, ok := v.Signals[field]
		if !ok || !contains(labels, got) {
			return malformed
		}
	}
	for field := range v.Signals {
		if _, ok := c.Spec.Signals[field]; !ok {
			return malformed
		}
	}
	return Outcome{Status: "verifier", Output: v.Output, Signals: v.Signals, Diagnostic: v.Diagnostic}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
