// Package terminal is the wire form of a reducer's terminal: what the
// engine ledgers of cluster (v1 runs) and runs (native runs) record as a
// run's result. It is a pure conversion and touches nothing else.
package terminal

import (
	"encoding/json"

	"github.com/oecp/oecp/engine/reduce"
	"github.com/oecp/oecp/protocol"
)

// Result is the protocol.TerminalResult of t: a succeeded run carries its
// output, normalised (no output is null), and no reason; any other run
// carries its reason. It fails when the output cannot be normalised.
func Result(t reduce.Terminal) (protocol.TerminalResult, error) {
	tr := protocol.TerminalResult{Status: string(t.Status)}
	if t.Status != reduce.TerminalSucceeded {
		tr.Reason = t.Reason
		return tr, nil
	}
	out := t.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	norm, err := protocol.NormalizeValue(out)
	if err != nil {
		return protocol.TerminalResult{}, err
	}
	tr.Output = &norm
	return tr, nil
}
