package store

// ForeignWakes is implemented by a store shared by several processes
// (Shared) that tells its wake-ups for commits it did not make itself
// apart: another process's commits, and the wake-ups that stand in for
// notifications it may have lost. A reader that learns of its own
// process's writes in detail needs to look at everything again only on
// those.
type ForeignWakes interface {
	// ForeignWakes is the number of such wake-ups so far.
	ForeignWakes() uint64
	// ForeignChanged returns a channel closed by the next such wake-up
	// (and when the store closes).
	ForeignChanged() <-chan struct{}
}
