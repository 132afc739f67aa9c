package identity_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/oecp/oecp/identity"
)

// TestRefusalReasons: every refused token is ErrUnauthorized with its
// text (what the peer is told), and carries the reason the server logs:
// unknown, expired, wrong audience, no tenant claim, no token at all; the
// reason never contains the token.
func TestRefusalReasons(t *testing.T) {
	now := time.Now()
	toks, err := identity.ParseTokens([]byte(`[{"token":"s3cret-expired","principal":"bob","tenant":"acme","expiresAt":"2001-01-01T00:00:00Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	rs := newSigner(t, "rs", jwt.SigningMethodRS256)
	j, err := identity.LoadJWT(writeJWTConfig(t, jwks(t, rs)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	with := func(edit func(jwt.MapClaims)) string {
		c := claims(now)
		edit(c)
		return rs.sign(t, c)
	}
	for _, c := range []struct {
		v      identity.Validator
		token  string
		reason string
	}{
		{toks, "s3cret-unknown", "not in the --auth-tokens file"},
		{toks, "s3cret-expired", "principal bob expired at 2001-01-01T00:00:00Z"},
		{j, with(func(c jwt.MapClaims) { c["aud"] = "someone-else" }), "audience"},
		{j, with(func(c jwt.MapClaims) { delete(c, "tenant") }), `no tenant claim "tenant"`},
		{j, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() }), "expired"},
		{identity.AnyOf(toks, j), with(func(c jwt.MapClaims) { c["aud"] = "x" }), "not in the --auth-tokens file; JWT: "},
	} {
		_, err := c.v.Validate(c.token)
		reason := identity.RefusalReason(err)
		if !errors.Is(err, identity.ErrUnauthorized) || err.Error() != identity.ErrUnauthorized.Error() {
			t.Errorf("%s: error %v, want ErrUnauthorized and its text", c.reason, err)
		}
		if !strings.Contains(reason, c.reason) || strings.Contains(reason, c.token) {
			t.Errorf("reason %q: want it to say %q and not hold the token", reason, c.reason)
		}
	}
	_, err = identity.Bearer(toks).Resolve(httptest.NewRequest("GET", "/oecp", nil))
	if r := identity.RefusalReason(err); !strings.Contains(r, "no bearer token") {
		t.Errorf("no Authorization header: reason %q", r)
	}
}
