package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// formatDiagnostic renders a GraphDiagnostic on one line.
func formatDiagnostic(raw json.RawMessage) string {
	var d struct {
		Severity string `json:"severity"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		Path     []struct {
			Kind  string `json:"kind"`
			Name  string `json:"name"`
			Index *int64 `json:"index"`
		} `json:"path"`
		RelatedNodes []string `json:"relatedNodes"`
	}
	if json.Unmarshal(raw, &d) != nil || d.Message == "" {
		return string(raw)
	}
	var path strings.Builder
	for _, p := range d.Path {
		switch {
		case p.Index != nil:
			fmt.Fprintf(&path, "[%d]", *p.Index)
		case p.Kind == "node":
			fmt.Fprintf(&path, "<%s>", p.Name)
		default:
			if path.Len() > 0 {
				path.WriteByte('.')
			}
			path.WriteString(p.Name)
		}
	}
	s := fmt.Sprintf("%s %s", d.Severity, d.Code)
	if path.Len() > 0 {
		s += " at " + path.String()
	}
	s += ": " + d.Message
	if len(d.RelatedNodes) > 0 {
		s += " (nodes: " + strings.Join(d.RelatedNodes, ", ") + ")"
	}
	return s
}

// printJSON writes one raw JSON value on its own line.
func (c *cli) printJSON(raw json.RawMessage) {
	fmt.Fprintf(c.stdout, "%s\n", raw)
}

func dedupNote(deduped bool) string {
	if deduped {
		return " (replayed: this idempotency key was already used for the same request)"
	}
	return ""
}

func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

func intOr(p *int64, def string) string {
	if p == nil {
		return def
	}
	return strconv.FormatInt(*p, 10)
}
