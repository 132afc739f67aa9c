package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIGraphSyntaxErrorPosition: a real example graph with one comma
// removed: plan, apply and verify say the line and column where the JSON
// breaks (the key after the missing comma), and --input @FILE does too.
func TestCLIGraphSyntaxErrorPosition(t *testing.T) {
	data, err := os.ReadFile("../../examples/repair-loop.json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	i := 20
	for ; i < len(lines) && !strings.HasSuffix(lines[i], ","); i++ {
	}
	if i == len(lines) {
		t.Fatal("no line ending with a comma past line 20")
	}
	lines[i] = strings.TrimSuffix(lines[i], ",")
	next := lines[i+1]
	where := fmt.Sprintf("line %d, column %d:", i+2, len(next)-len(strings.TrimLeft(next, " "))+1)
	bad := filepath.Join(t.TempDir(), "repair-loop.json")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, oecp(t, nil, "verify", "--graph", bad), 2, nil, []string{bad + " is not valid JSON: " + where})
	expect(t, oecp(t, nil, "plan", "-f", bad), 2, nil, []string{"graph file " + bad + " is not valid JSON: " + where})
	expect(t, oecp(t, nil, "apply", "-f", bad), 2, nil, []string{"graph file " + bad + " is not valid JSON: " + where})
	expect(t, oecp(t, nil, "apply", "-f", oneStep, "--input", "@"+bad), 2, nil, []string{"--input " + bad + " is not valid JSON: " + where})
}
