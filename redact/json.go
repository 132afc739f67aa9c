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

// mentioned reports whether raw may hold a spelling: as it is, escaped as
// json.Marshal escapes it, or behind an escape json.Marshal does not write
// (any \u, or \/ where a spelling has a '/', as base64 may).
func (s *Secrets) mentioned(raw []byte) bool {
	if bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	slash := bytes.Contains(raw, []byte(`\/`))
	for _, v := range s.spellings {
		esc, _ := json.Marshal(v)
		if bytes.Contains(raw, []byte(v)) || bytes.Contains(raw, esc[1:len(esc)-1]) || slash && strings.Contains(v, "/") {
			return true
		}
	}
	return false
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
