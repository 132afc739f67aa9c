package runs

import (
	"context"
	"slices"

	"github.com/oecp/oecp/protocol"
)

// defaultModels is the model of each harness that a client building a
// runtime plan uses for a node it names no model for.
var defaultModels = map[string]string{
	HarnessCodex:  "gpt-5.6",
	HarnessClaude: "claude-sonnet-5",
}

// HarnessLister is implemented by Agents that can name the host's
// harness entries (run/harnesses).
type HarnessLister interface {
	// HarnessEntries lists the configured entries, sorted by name.
	HarnessEntries() []HarnessEntry
}

// HarnessEntry is one entry of the host's harness file.
type HarnessEntry struct {
	// Name is the harness (codex or claude).
	Name string
	// Kind is its driver: the harness's own CLI (codex, claude) or
	// command.
	Kind string
}

// Harnesses answers the host's harness entries with the model catalogue
// of each; a host without a harness file offers none. The answer is the
// same for every tenant.
func (b *Backend) Harnesses(context.Context) (*protocol.RunHarnessesResult, error) {
	res := &protocol.RunHarnessesResult{Harnesses: []protocol.RunHarness{}}
	l, ok := b.cfg.Agents.(HarnessLister)
	if !ok {
		return res, nil
	}
	entries := l.HarnessEntries()
	for _, e := range entries {
		res.Harnesses = append(res.Harnesses, protocol.RunHarness{Name: e.Name, Kind: e.Kind, Models: slices.Clone(models[e.Name]),
			DefaultModel: defaultModels[e.Name], Default: len(entries) == 1})
	}
	return res, nil
}
