package store

// ForeignWakes is implemented by a store shared by several processes
// (Shared) that counts the wake-ups it gives for commits it did not make
// itself: another process's commits, and the wake-ups that stand in for
// notifications it may have lost. A reader that learns of its own
// process's writes in detail needs to look at everything again only when
// this count moved.
type ForeignWakes interface {
	ForeignWakes() uint64
}
