package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// yamlIndent is the indentation of a nesting level in -o yaml output.
const yamlIndent = 2

// writeYAML writes the JSON value raw as a YAML document: block style,
// keys in their JSON order, strings quoted only where YAML would read them
// as something else. JSON is YAML, so the library parses raw itself; only
// the JSON's flow and quoting styles are dropped.
func writeYAML(w io.Writer, raw json.RawMessage) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(yamlIndent)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// blockStyle clears the styles the JSON text gave n and its children, so
// that the encoder picks block collections and plain scalars where it can.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// printYAML writes raw as one YAML document ("---" first) on the
// command's stdout.
func (c *cli) printYAML(raw json.RawMessage) {
	fmt.Fprintln(c.stdout, "---")
	if err := writeYAML(c.stdout, raw); err != nil {
		fmt.Fprintf(c.stdout, "%s\n", raw)
	}
}
