package capsule

import (
	"context"

	"github.com/oecp/oecp/engine"
)

var (
	_ engine.TrailingFeed   = ledgers{}
	_ engine.SettleFinisher = ledgers{}
)

// Named is the native ledger's: the cluster ledger's feed reads the
// store when asked, so the store's announcement of a commit covers it.
func (l ledgers) Named() <-chan struct{} {
	if n, ok := l.native.(engine.TrailingFeed); ok {
		return n.Named()
	}
	return nil
}

// Changes joins the two backends' change feeds.
func (l ledgers) Changes(ctx context.Context) ([]engine.RunRef, bool, error) {
	var out []engine.RunRef
	all := false
	for _, x := range []engine.Ledger{l.cluster, l.native} {
		refs, a, err := x.Changes(ctx)
		if err != nil {
			return nil, false, err
		}
		out, all = append(out, refs...), all || a
	}
	return out, all, nil
}
