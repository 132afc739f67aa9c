package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeLogsWhyATokenWasRefused: at --log-level debug the server says
// why it refused a token (here: expired), never the token itself; the
// client is told only that it was refused.
func TestServeLogsWhyATokenWasRefused(t *testing.T) {
	dir := t.TempDir()
	const secret = "s3cret-token-of-bob"
	tokens := writeSecret(t, filepath.Join(dir, "tokens.json"), `[{"token":"`+secret+`","principal":"bob","tenant":"acme","expiresAt":"2001-01-01T00:00:00Z"}]`)
	tokenFile := writeSecret(t, filepath.Join(dir, "token"), secret+"\n")
	srv := startServer(t, "--auth-tokens", tokens, "--log-level", "debug")
	r := oecp(t, srv, "get", "--token-file", tokenFile)
	expect(t, r, 2, nil, []string{"401"})
	if strings.Contains(r.stderr, "expired at") {
		t.Errorf("the client was told the reason: %s", r.stderr)
	}
	line := srv.waitLog(t, "bearer token refused")
	if !strings.Contains(line, "principal bob expired at 2001-01-01T00:00:00Z") || strings.Contains(line, secret) {
		t.Errorf("refusal log line %q: want the reason, and never the token", line)
	}
}
