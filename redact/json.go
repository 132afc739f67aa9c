package redact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// JSON returns raw with every string of the JSON value (keys included)
// that holds a spelling redacted, in any of its JSON spellings (escaped
// as json.Marshal escapes it, or behind an escape json.Marshal does not
// write). A value that holds none is returned as it is; one that may is
// decoded and encoded again, numbers kept as written. Text that is not
// JSON has its spellings replaced as text. A nil *Secrets returns raw.
func (s *Secrets) JSON(raw json.RawMessage) json.RawMessage {
	if s == nil || len(raw) == 0 || !s.mentioned(raw) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(s.Replace(string(raw)))
	}
	out, err := json.Marshal(s.walk(v))
	if err != nil {
		return raw
	}
	return out
}

// mentioned reports whether raw may hold a spelling: as it is, escaped
// with only the escapes JSON requires (quote, backslash, control
// characters), or behind any other escape (any \u, or \/ where a spelling
// has a '/', as base64 may). A JSON writer may write every other character
// as it is, so those are the only forms a spelling can take.
func (s *Secrets) mentioned(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	slash := bytes.Contains(raw, []byte(`\/`))
	for _, v := range s.spellings {
		if bytes.Contains(raw, []byte(v)) || bytes.Contains(raw, requiredEscapes(v)) || slash && strings.Contains(v, "/") {
			return true
		}
	}
	return false
}

// requiredEscapes is v as a JSON string's content with only the escapes
// JSON requires: quote, backslash and the control characters with a short
// form (any other control character needs \u, which mentioned finds
// anyway).
func requiredEscapes(v string) []byte {
	out := make([]byte, 0, len(v)+8)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, `\b`...)
		case '\f':
			out = append(out, `\f`...)
		case '\n':
			out = append(out, `\n`...)
		case '\r':
			out = append(out, `\r`...)
		case '\t':
			out = append(out, `\t`...)
		default:
			out = append(out, c)
		}
	}
	return out
}

func (s *Secrets) walk(v any) any {
	switch t := v.(type) {
	case string:
		return s.Replace(t)
	case []any:
		for i := range t {
			t[i] = s.walk(t[i])
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[s.Replace(k)] = s.walk(e)
		}
		return out
	}
	return v
}
