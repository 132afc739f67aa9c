package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// readFileOrStdin reads the named file, or stdin when name is "-".
func readFileOrStdin(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// readGraph reads a graph file as raw JSON ("-" is stdin).
func readGraph(path string) (json.RawMessage, error) {
	b, err := readFileOrStdin(path)
	if err != nil {
		return nil, fmt.Errorf("read graph: %w", err)
	}
	if err := jsonSyntax(b); err != nil {
		return nil, fmt.Errorf("graph file %s is not valid JSON: %w", path, err)
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
	if err := jsonSyntax(b); err != nil && strings.HasPrefix(v, "@") {
		return nil, fmt.Errorf("%s %s is not valid JSON: %w", flagName, v[1:], err)
	} else if err != nil {
		return nil, fmt.Errorf("%s %q is not valid JSON (give a JSON value such as null, 42, \"text\" or {\"k\":1}, or @FILE)", flagName, v)
	}
	return json.RawMessage(b), nil
}

// jsonSyntax reports where data stops being JSON: the line and column
// (from 1, in bytes) of the offending character, and why; nil when data is
// valid JSON.
func jsonSyntax(data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err
	}
	// Offset counts the bytes read, the offending one included.
	off := min(max(int(se.Offset)-1, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
