package capsule

import (
	"context"

	"github.com/oecp/oecp/engine"
)

var _ engine.ChangeFeed = ledgers{}

// Changes joins the two backends' change feeds; a backend without one
// asks for a full pass every time.
func (l ledgers) Changes(ctx context.Context) ([]engine.RunRef, bool, error) {
	var out []engine.RunRef
	all := false
	for _, x := range []engine.Ledger{l.cluster, l.native} {
		f, ok := x.(engine.ChangeFeed)
		if !ok {
			all = true
			continue
		}
		refs, a, err := f.Changes(ctx)
		if err != nil {
			return nil, false, err
		}
		out, all = append(out, refs...), all || a
	}
	return out, all, nil
}
