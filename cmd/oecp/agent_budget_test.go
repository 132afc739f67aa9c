package main

import (
	"io"
	"testing"

	"github.com/spf13/pflag"
)

func TestAgentBudgetFlag(t *testing.T) {
	for _, tc := range []struct {
		arg string
		ok  bool
	}{{"0", true}, {"2.5", true}, {"-1", false}, {"NaN", false}, {"+Inf", false}} {
		var a agentAccounting
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		a.addFlags(fs)
		if err := fs.Parse([]string{"--max-agent-usd-per-run", tc.arg}); err != nil {
			t.Fatal(err)
		}
		if err := a.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: validate %v", tc.arg, err)
		}
	}
}
