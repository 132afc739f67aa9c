package graph

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oecp/oecp/protocol"
)

func isIdentChar(c byte, first bool) bool {
	switch {
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_':
		return true
	case first:
		return false
	case c >= '0' && c <= '9', c == '.', c == '-':
		return true
	}
	return false
}

func identChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentChar(s[i], i == 0) {
			return false
		}
	}
	return true
}

// IsIdentifier reports whether s is a valid NodeName/FieldName/EnumLabel:
// `^[A-Za-z_][A-Za-z0-9_.-]*$`, 1..MaxIdentifierBytes bytes.
func IsIdentifier(s string) bool { return len(s) <= MaxIdentifierBytes && identChars(s) }

// IsStableRef reports whether s is a valid `name@version` stable reference:
// at most MaxStableRefBytes bytes, split at the last '@', the name follows
// the identifier character rules, the version is decimal digits without a
// leading zero.
func IsStableRef(s string) bool {
	if len(s) > MaxStableRefBytes {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return false
	}
	name, version := s[:at], s[at+1:]
	if !identChars(name) || version == "" || version[0] == '0' {
		return false
	}
	return strings.Trim(version, "0123456789") == ""
}

// IsBoundedString256 reports whether s has 1..MaxBoundedString256Chars
// Unicode scalar values and no control characters (the protocol's rule,
// shared with its params).
func IsBoundedString256(s string) bool { return protocol.IsBoundedString256(s) }

// IsNodeInstructions reports whether s is valid NodeInstructions: at most
// MaxInstructionsBytes bytes, no NUL, at least one non-whitespace char.
func IsNodeInstructions(s string) bool {
	if len(s) > MaxInstructionsBytes || strings.IndexByte(s, 0) >= 0 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) >= 0
}

// IsSHA256Hex reports whether s is exactly 64 lowercase hex digits.
func IsSHA256Hex(s string) bool {
	return len(s) == SHA256HexLen && strings.Trim(s, "0123456789abcdef") == ""
}

// clip shortens a quoted echo of hostile input to 64 bytes, cut at a rune
// start.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
