package store

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Indexed is one entry of an index and its number (a sequence, a time).
type Indexed struct {
	Entry string
	N     uint64
}

// MaxIndexNumber is the largest number an index entry may have: both SQL
// stores keep it in a signed 64-bit column.
const MaxIndexNumber = math.MaxInt64

// ErrIndexNumber: SetIndexEntry was given a number above MaxIndexNumber.
var ErrIndexNumber = errors.New("store: index number out of range")

// CheckIndexNumber returns an error wrapping ErrIndexNumber when n cannot
// be stored in an index.
func CheckIndexNumber(key, entry string, n uint64) error {
	if n > MaxIndexNumber {
		return fmt.Errorf("%w: %d for entry %q of index %q", ErrIndexNumber, n, entry, key)
	}
	return nil
}

// compareIndexed is the order of an index's entries: by number, then by
// entry.
func compareIndexed(a, b Indexed) int {
	if c := cmp.Compare(a.N, b.N); c != 0 {
		return c
	}
	return cmp.Compare(a.Entry, b.Entry)
}

// sortIndexed puts entries in the order IndexEntries returns them.
func sortIndexed(entries []Indexed) { slices.SortFunc(entries, compareIndexed) }
