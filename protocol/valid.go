package protocol

import "unicode/utf8"

// maxJSONDepth is the deepest nesting of arrays and objects a frame may
// have, as encoding/json allows.
const maxJSONDepth = 10000

// ValidFrame reports, in one pass, whether data is one JSON text in valid
// UTF-8 with no \u escape of an unpaired UTF-16 surrogate: the same answer
// as utf8.Valid(data) && json.Valid(data) && !HasLoneSurrogate(data).
// Nesting deeper than encoding/json's 10,000 levels is invalid too.
func ValidFrame(data []byte) bool {
	v := validator{b: data}
	return v.text()
}

// validator walks one JSON text. The open containers are a stack of
// bits, 1 for an object, innermost at bit depth-1: the first 64 in low,
// the rest in high (allocated only for deeper texts).
type validator struct {
	b     []byte
	i     int
	depth int
	low   uint64
	high  []uint64
}

func (v *validator) push(object bool) {
	if v.depth%64 == 0 && v.depth > 0 && len(v.high) < v.depth/64 {
		v.high = append(v.high, 0)
	}
	word, bit := v.word(v.depth)
	if object {
		*word |= bit
	} else {
		*word &^= bit
	}
	v.depth++
}

// inObject reports whether the innermost open container is an object.
func (v *validator) inObject() bool {
	word, bit := v.word(v.depth - 1)
	return *word&bit != 0
}

func (v *validator) word(level int) (*uint64, uint64) {
	if level < 64 {
		return &v.low, 1 << level
	}
	return &v.high[level/64-1], 1 << (level % 64)
}

// The places of the walk between tokens.
const (
	atValue = iota // a value must start here
	atKey          // a member name must start here
	atNext         // a value has ended: ',', a closing bracket or the end
)

func (v *validator) text() bool {
	at := atValue
	for {
		v.space()
		var ok bool
		switch at {
		case atValue:
			at, ok = v.value()
		case atKey:
			ok = v.member()
			at = atValue
		default:
			if v.depth == 0 {
				return v.i == len(v.b)
			}
			at, ok = v.next()
		}
		if !ok {
			return false
		}
	}
}

// value consumes a scalar, or opens a container (closing it at once when
// it is empty), and says where the walk goes on.
func (v *validator) value() (int, bool) {
	if v.i >= len(v.b) {
		return 0, false
	}
	switch c := v.b[v.i]; c {
	case '{', '[':
		if v.depth >= maxJSONDepth {
			return 0, false
		}
		v.i++
		v.space()
		if v.i < len(v.b) && v.b[v.i] == c+2 { // '}' is '{'+2, ']' is '['+2
			v.i++
			return atNext, true
		}
		v.push(c == '{')
		if c == '{' {
			return atKey, true
		}
		return atValue, true
	case '"':
		return atNext, v.str()
	case 't':
		return atNext, v.literal("true")
	case 'f':
		return atNext, v.literal("false")
	case 'n':
		return atNext, v.literal("null")
	default:
		return atNext, v.number()
	}
}

// member consumes a member name and its colon.
func (v *validator) member() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' || !v.str() {
		return false
	}
	v.space()
	if v.i >= len(v.b) || v.b[v.i] != ':' {
		return false
	}
	v.i++
	return true
}

// next consumes what may follow a value inside a container.
func (v *validator) next() (int, bool) {
	if v.i >= len(v.b) {
		return 0, false
	}
	object := v.inObject()
	switch c := v.b[v.i]; {
	case c == ',':
		v.i++
		if object {
			return atKey, true
		}
		return atValue, true
	case object && c == '}', !object && c == ']':
		v.i++
		v.depth--
		return atNext, true
	}
	return 0, false
}

func (v *validator) space() {
	for v.i < len(v.b) {
		switch v.b[v.i] {
		case ' ', '\t', '\n', '\r':
			v.i++
		default:
			return
		}
	}
}

func (v *validator) literal(word string) bool {
	if len(v.b)-v.i < len(word) || string(v.b[v.i:v.i+len(word)]) != word {
		return false
	}
	v.i += len(word)
	return true
}

// str consumes a string: no control character, valid UTF-8, known
// escapes, and every surrogate escape paired high then low.
func (v *validator) str() bool {
	b := v.b
	for i := v.i + 1; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			v.i = i + 1
			return true
		case c == '\\':
			n, ok := escape(b, i)
			if !ok {
				return false
			}
			i += n
		case c < 0x20:
			return false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			i += size
		}
	}
	return false
}

// escape measures the escape at b[i] (a backslash); a high surrogate
// escape counts with the low one that must follow it.
func escape(b []byte, i int) (int, bool) {
	if i+1 >= len(b) {
		return 0, false
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		r, ok := hex4(b, i+2)
		switch {
		case !ok || r >= 0xdc00 && r <= 0xdfff:
			return 0, false
		case r >= 0xd800 && r <= 0xdbff:
			return 12, isLowEscape(b, i+6)
		}
		return 6, true
	}
	return 0, false
}

// number consumes -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (v *validator) number() bool {
	b, i := v.b, v.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return false
		}
		i = digits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		i = digits(b, i)
	}
	v.i = i
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// digits skips the run of digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}
