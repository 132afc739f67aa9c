package identity_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/oecp/oecp/identity"
)

func TestExpiryBoundaryCountsAsExpired(t *testing.T) {
	at := time.Unix(50, 0)
	id := identity.ConnectionIdentity{Principal: "p", Tenant: "t", ExpiresAt: at}
	if id.ExpiredAt(at.Add(-time.Nanosecond)) {
		t.Fatal("expired before expiresAt")
	}
	if !id.ExpiredAt(at) || !id.ExpiredAt(at.Add(time.Second)) {
		t.Fatal("not expired at or after expiresAt")
	}
	if identity.Local().ExpiredAt(time.Unix(1<<40, 0)) {
		t.Fatal("the local identity never expires")
	}
}

func TestTokenFileIsStrict(t *testing.T) {
	for _, bad := range []string{
		`{}`,
		`[{"token":"a","principal":"p","tenant":"t"}]`,
		`[{"token":"a","principal":"p","tenant":"t","expiresAt":"tomorrow"}]`,
		`[{"token":"a","principal":"p","tenant":"t","expiresAt":"2999-01-01T00:00:00Z","admin":true}]`,
		`[{"token":"a","principal":"p","tenant":"t","expiresAt":"2999-01-01T00:00:00Z"},{"token":"a","principal":"q","tenant":"u","expiresAt":"2999-01-01T00:00:00Z"}]`,
	} {
		if _, err := identity.ParseTokens([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestTokensResolveAndExpire(t *testing.T) {
	toks, err := identity.ParseTokens([]byte(`[{"token":"s3cret","principal":"alice","tenant":"a","expiresAt":"2030-01-01T00:00:00Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	toks.SetClock(func() time.Time { return now })
	req := func(h string) *http.Request {
		r, _ := http.NewRequest("GET", "http://x/oecp", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		return r
	}
	id, err := toks.Resolve(req("Bearer s3cret"))
	if err != nil || id.Principal != "alice" || id.Tenant != "a" || !id.ExpiresAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v %v", id, err)
	}
	for _, h := range []string{"", "Bearer", "Bearer nope", "Basic s3cret"} {
		if _, err := toks.Resolve(req(h)); err == nil {
			t.Errorf("%q resolved", h)
		}
	}
	now = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := toks.Resolve(req("Bearer s3cret")); err == nil {
		t.Fatal("expired token resolved")
	}
}
