package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// shortEscapes maps the bytes with a two-character escape to its letter.
var shortEscapes = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// AppendString appends s as a JSON string the way the reference serializer
// does: only '"', '\\' and C0 controls are escaped (\b \f \n \r \t, the rest
// as lowercase \u00xx); '<', '>', '&', U+2028, U+2029 and all other
// non-ASCII characters are written raw. Invalid UTF-8 is replaced by U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		if e := shortEscapes[c]; e != 0 {
			b = append(b, '\\', e)
		} else {
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Marshal encodes v with encoding/json in struct-declaration order, then
// fixes the two places where Go's output differs from the reference's:
// HTML characters are not escaped and U+2028/U+2029 are written raw.
// Free-form values must be of type Value so that their keys come out sorted.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	out = out[:len(out)-1] // Encode appends '\n'
	return unescapeLineSeparators(out), nil
}

// unescapeLineSeparators turns the \u2028 and \u2029 escapes that
// encoding/json always writes back into raw characters.
func unescapeLineSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' && b[i+2] == '2' && b[i+3] == '0' && b[i+4] == '2' && (b[i+5] == '8' || b[i+5] == '9') {
			if b[i+5] == '8' {
				out = append(out, "\u2028"...)
			} else {
				out = append(out, "\u2029"...)
			}
			i += 5
			continue
		}
		// Any other escape: copy the backslash and the escaped byte.
		out = append(out, b[i])
		if i+1 < len(b) {
			out = append(out, b[i+1])
			i++
		}
	}
	return out
}

// Value is a free-form JSON value (input, output, diagnostic, details ...).
// It always holds the normalised encoding produced by NormalizeValue:
// compact, object keys sorted by byte order, duplicate keys collapsed
// last-wins, numbers in the reference's form. The zero Value is JSON null.
type Value []byte

// Null is the JSON null value.
var Null = Value("null")

// MarshalJSON returns the normalised bytes.
func (v Value) MarshalJSON() ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return v, nil
}

// UnmarshalJSON normalises raw JSON into v.
func (v *Value) UnmarshalJSON(b []byte) error {
	n, err := NormalizeValue(b)
	if err != nil {
		return err
	}
	*v = n
	return nil
}

// IsNull reports whether v is JSON null (or unset).
func (v Value) IsNull() bool { return len(v) == 0 || string(v) == "null" }

// ErrInvalidJSON is returned when a free-form value is not valid JSON.
var ErrInvalidJSON = errors.New("invalid JSON")

// NormalizeValue re-encodes raw JSON the way the reference echoes free-form
// values: serde_json's Value with sorted maps. Integers that fit int64 or
// uint64 stay integers; every other number becomes an f64 written in Rust's
// shortest round-trip form ("1.0", "1.5", "1e21").
func NormalizeValue(raw []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidJSON, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalidJSON)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalidJSON)
	}
	return AppendValue(nil, x)
}

// AppendValue appends a decoded JSON tree (as produced by a json.Decoder
// with UseNumber) in normalised form.
func AppendValue(b []byte, x any) ([]byte, error) {
	switch t := x.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if t {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case string:
		return AppendString(b, t), nil
	case json.Number:
		return AppendNumber(b, string(t))
	case float64:
		return appendRustFloat(b, t)
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case int:
		return strconv.AppendInt(b, int64(t), 10), nil
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = AppendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = AppendValue(b, t[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	default:
		return nil, fmt.Errorf("protocol: unsupported value type %T", x)
	}
}

// AppendNumber appends a JSON number literal in the reference's form.
func AppendNumber(b []byte, lit string) ([]byte, error) {
	if !strings.ContainsAny(lit, ".eE") {
		if _, err := strconv.ParseInt(lit, 10, 64); err == nil {
			if lit == "-0" {
				return append(b, "-0.0"...), nil
			}
			return append(b, lit...), nil
		}
		if _, err := strconv.ParseUint(lit, 10, 64); err == nil {
			return append(b, lit...), nil
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Errorf("%w: bad number %q", ErrInvalidJSON, lit)
	}
	return appendRustFloat(b, f)
}

// appendRustFloat writes f like Rust's ryu-based serde_json: integral values
// get a trailing ".0", scientific notation is used below 1e-5 and from
// 1e16 on, without a '+' in the exponent.
func appendRustFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// serde_json writes non-finite floats as null.
		return append(b, "null"...), nil
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...), nil
		}
		return append(b, "0.0"...), nil
	}
	// Shortest round-trip digits and decimal exponent.
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	neg := s[0] == '-'
	if neg {
		s = s[1:]
		b = append(b, '-')
	}
	epos := strings.IndexByte(s, 'e')
	mant, expStr := s[:epos], s[epos+1:]
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	n := len(digits)
	k := exp + 1 // position of the decimal point relative to digits start
	switch {
	case 0 <= exp && k <= 16:
		if n <= k {
			b = append(b, digits...)
			for i := n; i < k; i++ {
				b = append(b, '0')
			}
			return append(b, '.', '0'), nil
		}
		b = append(b, digits[:k]...)
		b = append(b, '.')
		return append(b, digits[k:]...), nil
	case -5 < k && k <= 0:
		b = append(b, '0', '.')
		for i := k; i < 0; i++ {
			b = append(b, '0')
		}
		return append(b, digits...), nil
	default:
		b = append(b, digits[0])
		if n > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		return strconv.AppendInt(b, int64(exp), 10), nil
	}
}
