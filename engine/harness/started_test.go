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
	for _, c := range []struct{ cli, env, provider string }{
		{"codex", "OPENAI_API_KEY", "openai"},
		{"claude", "ANTHROPIC_API_KEY", "anthropic"},
	} {
		t.Run(c.cli, func(t *testing.T) {
			t.Setenv(c.env, "k")
			f := newFakeCLI(t, c.cli)
			if c.cli == "codex" {
				f.events(0, codexTurn("th-1", `{"text":"better"}`)...)
			} else {
				f.events(0, claudeTurn("s-1", `{"text":"better"}`)...)
			}
			f.action(0, `echo $$ > "$d/leader"`)
			env := c.env
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
