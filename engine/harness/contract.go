package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/graph"
)

// MaxCorrections is the number of correction turns after a rejected
// answer; the answer of the last one must be valid or the execution ends
// malformed.
const MaxCorrections = 2

// maxProblemBytes bounds a validation message sent back to the agent.
const maxProblemBytes = 8 << 10

// ErrNotAgentNode is returned for a node that cannot run through a harness:
// not a step or verifier, or without instructions.
var ErrNotAgentNode = errors.New("not an agent node")

// Contract is the runtime-owned response contract of an agent node.
type Contract struct {
	// Verifier is true for a verifier node, false for a step (a worker).
	Verifier bool
	// Output is the type of the output value.
	Output graph.PayloadType
	// Signals maps each signal field to its closed label set (verifier).
	Signals map[string][]string
	// Diagnostic is the diagnostic type (verifier).
	Diagnostic graph.PayloadType
}

// ContractFor returns the contract and the authored instructions of an
// agent node: a *graph.Step or *graph.Verifier with instructions.
func ContractFor(n graph.Node) (Contract, string, error) {
	switch t := n.(type) {
	case *graph.Step:
		if t.Instructions == nil {
			break
		}
		return Contract{Output: t.Output}, *t.Instructions, nil
	case *graph.Verifier:
		if t.Instructions == nil {
			break
		}
		return Contract{Verifier: true, Output: t.Output, Signals: t.Signals, Diagnostic: t.Diagnostic}, *t.Instructions, nil
	}
	if n == nil {
		return Contract{}, "", fmt.Errorf("%w: no node", ErrNotAgentNode)
	}
	return Contract{}, "", fmt.Errorf("%w: %s %q needs to be a step or verifier with instructions", ErrNotAgentNode, n.NodeKind(), n.NodeName())
}

// JSON is the compact contract: {"kind":"worker","output":T} or
// {"kind":"verifier","output":T,"signals":{field:[sorted labels]},"diagnostic":T}.
func (c Contract) JSON() []byte {
	b := []byte(`{"kind":"worker","output":`)
	if c.Verifier {
		b = []byte(`{"kind":"verifier","output":`)
	}
	out, _ := c.Output.MarshalJSON()
	b = append(b, out...)
	if c.Verifier {
		signals := map[string][]string{}
		for f, labels := range c.Signals {
			signals[f] = append([]string{}, labels...)
			sort.Strings(signals[f])
		}
		sig, _ := json.Marshal(signals) // keys sorted by encoding/json
		diag, _ := c.Diagnostic.MarshalJSON()
		b = append(append(append(b, `,"signals":`...), sig...), `,"diagnostic":`...)
		b = append(b, diag...)
	}
	return append(b, '}')
}

// guidance closes every prompt and correction.
func (c Contract) guidance() string {
	g := "Do not echo the contract. Answer with bare JSON only: no Markdown fences, no commentary.\n"
	if c.Verifier {
		return g + "Return exactly one object {\"output\": ..., \"signals\": ..., \"diagnostic\": ...}: output and diagnostic match their types, and signals gives every declared field exactly one of its declared labels.\n"
	}
	return g + "Return the output value itself, matching the output type (a {\"kind\":\"null\"} output is the literal null).\n"
}

// RenderPrompt is a first turn: a preamble, the authored instructions
// verbatim, the input as compact JSON, the contract, then the answer rules.
// Each section header is on its own line and each JSON value on one line.
func RenderPrompt(instructions string, input json.RawMessage, c Contract) (string, error) {
	var in bytes.Buffer
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if err := json.Compact(&in, input); err != nil {
		return "", fmt.Errorf("input is not JSON: %w", err)
	}
	return "Execute this graph node in the shared workspace.\n\n" +
		section("Authored instructions:", instructions) +
		section("Input JSON:", in.String()) +
		section("Runtime-owned response contract:", string(c.JSON())) +
		c.guidance(), nil
}

// section is a header line, its body and a blank line.
func section(header, body string) string { return header + "\n" + body + "\n\n" }

// RenderCorrection is a correction turn after a rejected answer: it says
// the answer never reached the graph, gives the validation error and the
// contract, and asks for corrected bare JSON. It does not repeat the
// instructions or the input; the session holds them.
func RenderCorrection(problem string, c Contract) string {
	return "Your previous answer was rejected by mechanical validation and did not reach the graph.\n\n" +
		section("Validation error:", problem) +
		section("Response contract:", string(c.JSON())) +
		"Answer again with corrected bare JSON.\n" + c.guidance()
}

// Validate checks a final answer mechanically. The whole text must be one
// JSON value (surrounding whitespace aside; no fences are stripped). A
// worker's value must match Output and yields a "verified" outcome; a
// verifier's must be exactly {output, signals, diagnostic} with typed
// output and diagnostic and exactly the declared signal fields, each with a
// declared label, and yields a "verifier" outcome. The error message (at
// most 8 KiB) is meant for the correction turn.
func (c Contract) Validate(text string) (worker.Outcome, error) {
	raw := json.RawMessage(strings.TrimSpace(text))
	var probe any
	if err := json.Unmarshal(raw, &probe); err != nil {
		return worker.Outcome{}, problem("final response is not valid JSON: " + err.Error())
	}
	if !c.Verifier {
		if err := c.Output.Validate(raw); err != nil {
			return worker.Outcome{}, problem("output " + err.Error())
		}
		return worker.Outcome{Status: "verified", Output: raw}, nil
	}
	obj, ok := probe.(map[string]any)
	if !ok {
		return worker.Outcome{}, problem("final response must be an object {output, signals, diagnostic}")
	}
	var v map[string]json.RawMessage
	_ = json.Unmarshal(raw, &v)
	for _, k := range sortedKeys(obj) {
		if k != "output" && k != "signals" && k != "diagnostic" {
			return worker.Outcome{}, problem("final response contains undeclared field " + k)
		}
	}
	for _, k := range []string{"diagnostic", "output", "signals"} {
		if _, ok := v[k]; !ok {
			return worker.Outcome{}, problem("final response is missing required field " + k)
		}
	}
	if err := c.Output.Validate(v["output"]); err != nil {
		return worker.Outcome{}, problem("output " + err.Error())
	}
	if err := c.Diagnostic.Validate(v["diagnostic"]); err != nil {
		return worker.Outcome{}, problem("diagnostic " + err.Error())
	}
	signals, err := c.checkSignals(v["signals"])
	if err != nil {
		return worker.Outcome{}, err
	}
	return worker.Outcome{Status: "verifier", Output: v["output"], Signals: signals, Diagnostic: v["diagnostic"]}, nil
}

func (c Contract) checkSignals(raw json.RawMessage) (map[string]string, error) {
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil || got == nil {
		return nil, problem("signals must be an object of field: label")
	}
	for _, f := range sortedKeys(c.Signals) {
		if _, ok := got[f]; !ok {
			return nil, problem("signals is missing required field " + f)
		}
	}
	out := make(map[string]string, len(got))
	for _, f := range sortedKeys(got) {
		labels, declared := c.Signals[f]
		if !declared {
			return nil, problem("signals contains undeclared field " + f)
		}
		l, isString := got[f].(string)
		if !isString {
			return nil, problem("signals." + f + " must be a label string")
		}
		if !slices.Contains(labels, l) {
			return nil, problem("signals." + f + " contains undeclared label " + l)
		}
		out[f] = l
	}
	return out, nil
}

// problem bounds a validation message to maxProblemBytes on a UTF-8
// boundary.
func problem(msg string) error { return errors.New(truncateUTF8(msg, maxProblemBytes)) }
