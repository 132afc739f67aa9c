package protocol

import (
	"fmt"
	"unicode/utf8"
)

// IsControl reports whether r is a Unicode control character:
// U+0000–U+001F or U+007F–U+009F. No bounded string of the protocol may
// hold one.
func IsControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// HasControl reports whether s holds a Unicode control character.
func HasControl(s string) bool {
	for _, r := range s {
		if IsControl(r) {
			return true
		}
	}
	return false
}

// IsBoundedString256 reports whether s is a BoundedString256: valid UTF-8,
// 1..MaxBoundedString Unicode scalar values, no control characters.
func IsBoundedString256(s string) bool {
	n := utf8.RuneCountInString(s)
	return n >= 1 && n <= MaxBoundedString && utf8.ValidString(s) && !HasControl(s)
}

// boundedString checks BoundedString256: 1..256 characters, no controls.
func boundedString(k, s string) error {
	n := utf8.RuneCountInString(s)
	if n == 0 || n > MaxBoundedString {
		return fmt.Errorf("%w: `%s` must be 1..%d characters", ErrDecode, k, MaxBoundedString)
	}
	if HasControl(s) {
		return fmt.Errorf("%w: `%s` must not contain control characters", ErrDecode, k)
	}
	return nil
}
