package protocol

import "bytes"

// HasLoneSurrogate reports whether the JSON text data holds a \u escape of
// a UTF-16 surrogate that is not part of a high-low pair. Such an escape
// names no character: decoding it would silently turn it into U+FFFD, so
// "\ud800x", "\udbffx" and "\ufffdx" would become the same string (the same
// request id). A frame holding one is a parse error.
//
// The scan needs no string tracking: in valid JSON a backslash appears
// only inside strings, and "\\" is consumed as one escape.
func HasLoneSurrogate(data []byte) bool {
	if bytes.IndexByte(data, '\\') < 0 {
		return false
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		if i+1 >= len(data) || data[i+1] != 'u' {
			i++ // a two-character escape, "\\" included
			continue
		}
		r, ok := hex4(data, i+2)
		i += 5
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r >= 0xdc00:
			return true // a low surrogate with no high one before it
		default:
			if !isLowEscape(data, i+1) {
				return true
			}
			i += 6
		}
	}
	return false
}

// isLowEscape reports whether a \uDC00–\uDFFF escape starts at data[i:].
func isLowEscape(data []byte, i int) bool {
	if i+1 >= len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return false
	}
	r, ok := hex4(data, i+2)
	return ok && r >= 0xdc00 && r <= 0xdfff
}

// hex4 reads four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
