// Command echoagent is a harness for `oecp serve --harness FILE` that runs
// no model, so a native run can be tried without any agent CLI. The
// server's command driver runs it once per turn, in the run's working
// directory with an empty environment, and writes the turn as JSON on its
// stdin:
//
//	{"prompt": "...", "node": "draft", "model": "...", "effort": null, "session": null}
//
// It answers {"session", "text"} on stdout, where text is bare JSON built
// from the prompt's "Input JSON:" and contract sections: a step answers its
// input unchanged (so its output type must accept its input); a verifier
// answers {"output": its input (null when the output type is null),
// "signals": {field: the field's first label}, "diagnostic": null}. A
// correction turn carries no input and answers as if the input were null.
// Each line on stderr becomes one of the run's log records.
//
// Build it where the harness file expects it:
//
//	go build -o /tmp/oecp-echo-agent ./examples/native/echoagent
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// turn is what the command driver writes on stdin.
type turn struct {
	Prompt  string  `json:"prompt"`
	Node    string  `json:"node"`
	Model   string  `json:"model"`
	Session *string `json:"session"`
}

// contract is the runtime-owned response contract of the node.
type contract struct {
	Kind   string `json:"kind"`
	Output struct {
		Kind string `json:"kind"`
	} `json:"output"`
	Signals map[string][]string `json:"signals"`
}

func main() {
	if err := answer(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "echo-agent:", err)
		os.Exit(1)
	}
}

func answer(in io.Reader, out, log io.Writer) error {
	var t turn
	if err := json.NewDecoder(in).Decode(&t); err != nil {
		return fmt.Errorf("read the turn: %w", err)
	}
	lines := strings.Split(t.Prompt, "\n")
	input := json.RawMessage(after(lines, "Input JSON:"))
	if !json.Valid(input) {
		input = json.RawMessage("null")
	}
	text := after(lines, "Runtime-owned response contract:")
	if text == "" {
		text = after(lines, "Response contract:")
	}
	var c contract
	if err := json.Unmarshal([]byte(text), &c); err != nil {
		return fmt.Errorf("the prompt has no response contract: %w", err)
	}
	fmt.Fprintf(log, "echo-agent: %s node %s (model %s) answers without a model\n", c.Kind, t.Node, t.Model)
	var reply any = input
	if c.Kind == "verifier" {
		signals := map[string]string{}
		for field, labels := range c.Signals {
			signals[field] = labels[0]
		}
		output := input
		if c.Output.Kind == "null" {
			output = json.RawMessage("null")
		}
		reply = map[string]any{"output": output, "signals": signals, "diagnostic": nil}
	}
	body, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	session := "echo-agent-" + t.Node
	if t.Session != nil {
		session = *t.Session
	}
	return json.NewEncoder(out).Encode(map[string]string{"session": session, "text": string(body)})
}

// after is the line after the last line equal to header ("" if none).
func after(lines []string, header string) string {
	for i := len(lines) - 2; i >= 0; i-- {
		if lines[i] == header {
			return lines[i+1]
		}
	}
	return ""
}
