package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/oecp/oecp/engine/harness"
)

// agentStall is how long `oecp serve` lets an agent CLI (codex, claude)
// stay silent before its turn ends as a timeout.
type agentStall struct {
	timeout time.Duration
}

func (a *agentStall) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&a.timeout, "agent-stall-timeout", harness.DefaultStallTimeout,
		"end an agent CLI's turn (codex, claude) once it has written nothing for `DURATION`: the execution ends as a timeout, saying \"no output from the agent for …\" (0: no bound)")
}

func (a agentStall) validate() error {
	if a.timeout < 0 {
		return fmt.Errorf("--agent-stall-timeout %v: want a positive duration, or 0 for no bound", a.timeout)
	}
	return nil
}

// apply sets the harness configuration's stall timeout.
func (a agentStall) apply(c *harness.Config) { c.SetStallTimeout(a.timeout) }
