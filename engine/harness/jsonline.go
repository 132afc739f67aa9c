package harness

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Reading a CLI's JSON event lines, and the authentication failures its
// messages name.

// fields decodes one JSON object of an event stream; a missing or
// non-string "type" is an error.
func fields(line []byte) (map[string]json.RawMessage, string, error) {
	if !utf8.Valid(line) {
		return nil, "", fmt.Errorf("an event is not UTF-8")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil || m == nil {
		return nil, "", fmt.Errorf("an event is not a JSON object")
	}
	var kind string
	if err := json.Unmarshal(m["type"], &kind); err != nil {
		return nil, "", fmt.Errorf("an event has no string type")
	}
	return m, kind, nil
}

// str is a JSON string member, or "" when absent or of another type.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// object is a JSON object member, or nil when absent or of another type.
func object(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

// authStatusRE finds an HTTP 401 or 403 in a provider error message
// ("unexpected status 401 Unauthorized", "HTTP 403", "403 Forbidden").
var authStatusRE = regexp.MustCompile(`(?i)(?:status:?\s*|http\s*)(401|403)\b|\b(401) unauthorized\b|\b(403) forbidden\b`)

// authStatus is the credential status (401 or 403) a provider error
// message names, or 0.
func authStatus(msg string) int {
	m := authStatusRE.FindStringSubmatch(msg)
	for _, g := range m[min(1, len(m)):] {
		if n, err := strconv.Atoi(g); err == nil {
			return n
		}
	}
	return 0
}

// isAuthStatus reports whether an HTTP status is a refused credential.
func isAuthStatus(n int) bool { return n == 401 || n == 403 }
