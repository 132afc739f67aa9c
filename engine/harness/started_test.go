package harness_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/worker"
)

// TestCLITurnsPassTheirProcessGroup: the Codex and Claude drivers pass
// the process group of each CLI process they start to the execution's
// Started hook, so the engine can record it and kill what an orphaned
// turn left after a crash.
func TestCLITurnsPassTheirProcessGroup(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "k")
	t.Setenv("ANTHROPIC_API_KEY", "k")
	for _, c := range []struct{ cli, events, provider string }{
		{"codex", strings.Join(codexTurn("th-1", `{"text":"better"}`), "\n"), "openai"},
		{"claude", strings.Join(claudeTurn("s-1", `{"text":"better"}`), "\n"), "anthropic"},
	} {
		t.Run(c.cli, func(t *testing.T) {
			f := newFakeCLI(t, c.cli)
			f.events(0, c.events)
			f.action(0, `echo $$ > "$d/leader"`)
			env := "OPENAI_API_KEY"
			if c.cli == "claude" {
				env = "ANTHROPIC_API_KEY"
			}
			b := harness.Binding{Model: "m", Env: []string{env}}
			var groups []int
			rec := &recorder{}
			o := f.runner(env).Run(context.Background(), f.job(textStep(t), b, c.provider), worker.Execution{
				Ref: "ex-1", Node: "write", Attempt: 1, Input: json.RawMessage(`{"text":"draft"}`), Sinks: rec.sinks(),
				Started: func(pgid int) { groups = append(groups, pgid) },
			})
			if s := outcome(o); s != wantVerified {
				t.Fatalf("outcome %s\n%s", s, rec.text())
			}
			leader, err := strconv.Atoi(strings.TrimSpace(f.read("leader")))
			if err != nil {
				t.Fatal(err)
			}
			if len(groups) != 1 || groups[0] != leader {
				t.Fatalf("Started got %v, want the CLI's group %d", groups, leader)
			}
		})
	}
}
