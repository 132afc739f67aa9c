package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// readGraph reads a graph file as raw JSON ("-" is stdin).
func readGraph(path string) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read graph: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("graph file %s is not valid JSON", path)
	}
	return json.RawMessage(b), nil
}

// parseJSONArg reads a JSON value given on the command line, or from a
// file with @FILE.
func parseJSONArg(flagName, v string) (json.RawMessage, error) {
	b := []byte(v)
	if strings.HasPrefix(v, "@") {
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, fmt.Errorf("read %s: %w", flagName, err)
		}
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s %q is not valid JSON (give a JSON value such as null, 42, \"text\" or {\"k\":1}, or @FILE)", flagName, v)
	}
	return json.RawMessage(b), nil
}
