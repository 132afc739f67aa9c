package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// jsonNode is a decoded JSON value that keeps object keys in order.
type jsonNode struct {
	scalar string // the JSON text of a scalar; "" for objects and arrays
	isObj  bool
	keys   []string
	vals   []*jsonNode // object values by key, or array items
}

func decodeNode(dec *json.Decoder) (*jsonNode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		b, err := json.Marshal(tok)
		return &jsonNode{scalar: string(b)}, err
	}
	n := &jsonNode{isObj: d == '{'}
	for dec.More() {
		if n.isObj {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k.(string))
		}
		v, err := decodeNode(dec)
		if err != nil {
			return nil, err
		}
		n.vals = append(n.vals, v)
	}
	_, err = dec.Token() // the closing delimiter
	return n, err
}

// writeYAML writes the JSON value raw as a YAML document (block style,
// keys in their JSON order).
func writeYAML(w io.Writer, raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := decodeNode(dec)
	if err != nil {
		return err
	}
	var b strings.Builder
	if n.scalar != "" || len(n.vals) == 0 {
		b.WriteString(n.inline() + "\n")
	} else {
		n.block(&b, "")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// inline is a scalar, or an empty object or array.
func (n *jsonNode) inline() string {
	switch {
	case n.scalar != "":
		return yamlScalar(n.scalar)
	case n.isObj:
		return "{}"
	}
	return "[]"
}

// block writes a non-empty object or array, each line starting with
// indent.
func (n *jsonNode) block(b *strings.Builder, indent string) {
	for i, v := range n.vals {
		lead := indent + "- "
		if n.isObj {
			lead = indent + yamlKey(n.keys[i]) + ":"
		}
		nested := v.scalar == "" && len(v.vals) > 0
		switch {
		case !nested && n.isObj:
			b.WriteString(lead + " " + v.inline() + "\n")
		case !nested:
			b.WriteString(lead + v.inline() + "\n")
		case n.isObj:
			b.WriteString(lead + "\n")
			v.block(b, indent+"  ")
		default:
			// An item that is itself a block starts on the dash's line.
			var sub strings.Builder
			v.block(&sub, indent+"  ")
			b.WriteString(lead + strings.TrimPrefix(sub.String(), indent+"  "))
		}
	}
}

// plainSafe matches strings YAML reads back as the same string unquoted.
var plainSafe = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_ ./@+=-]*$`)

// yamlReserved are plain words YAML would read as something else.
var yamlReserved = map[string]bool{"null": true, "true": true, "false": true, "yes": true, "no": true, "on": true, "off": true, "y": true, "n": true, "~": true}

// yamlScalar renders a JSON scalar: numbers, booleans and null as they
// are; a string plain when that reads back the same, else JSON-quoted
// (a JSON string is a valid YAML double-quoted scalar).
func yamlScalar(js string) string {
	if !strings.HasPrefix(js, `"`) {
		return js
	}
	var s string
	if json.Unmarshal([]byte(js), &s) != nil {
		return js
	}
	return yamlKey(s)
}

// yamlKey renders a string plain when safe, else quoted.
func yamlKey(s string) string {
	if plainSafe.MatchString(s) && !strings.HasSuffix(s, " ") && !yamlReserved[strings.ToLower(s)] {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// printYAML writes raw as one YAML document ("---" first) on the
// command's stdout.
func (c *cli) printYAML(raw json.RawMessage) {
	fmt.Fprintln(c.stdout, "---")
	if err := writeYAML(c.stdout, raw); err != nil {
		fmt.Fprintf(c.stdout, "%s\n", raw)
	}
}
