package harness

import (
	"regexp"
	"strconv"
)

// The authentication failures a provider's error messages name.

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
