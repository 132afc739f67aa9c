// Package identity defines the connection identity every OECP connection
// carries (principal, tenant, hard expiry), the Resolver interface a host
// implements to supply it, and the built-in resolvers: the anonymous local
// identity, and bearer credentials checked by Validators (a bearer-token
// file, JWTs verified against an issuer's keys, or any of several). An
// identity has no wire representation: nothing in a request can change it.
package identity

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// ConnectionIdentity is resolved once per connection before the first frame
// and never changes afterwards.
type ConnectionIdentity struct {
	Principal string
	Tenant    string
	// IssuedAt is zero when unknown.
	IssuedAt time.Time
	// ExpiresAt is the hard expiry: at or after it no frame reaches the
	// backend and the connection is closed. The zero value never expires.
	ExpiresAt time.Time
	// Attributes are opaque to the server; hosts may use them.
	Attributes map[string]string
}

// Local is the identity of unauthenticated loopback connections.
func Local() ConnectionIdentity {
	return ConnectionIdentity{Principal: "local", Tenant: "local"}
}

// ExpiredAt reports whether the identity is expired at t (the boundary
// instant counts as expired).
func (id ConnectionIdentity) ExpiredAt(t time.Time) bool {
	return !id.ExpiresAt.IsZero() && !t.Before(id.ExpiresAt)
}

// Resolver resolves the identity of a new connection. For WebSocket the
// request is the upgrade request; for NDJSON it is nil.
type Resolver interface {
	Resolve(r *http.Request) (ConnectionIdentity, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(r *http.Request) (ConnectionIdentity, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(r *http.Request) (ConnectionIdentity, error) { return f(r) }

// Static always resolves to the same identity.
type Static ConnectionIdentity

// Resolve returns the static identity.
func (s Static) Resolve(*http.Request) (ConnectionIdentity, error) { return ConnectionIdentity(s), nil }

// ErrUnauthorized is returned when a connection presents no valid token.
var ErrUnauthorized = errors.New("identity: missing, unknown or expired bearer token")

type ctxKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id ConnectionIdentity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the identity in ctx, or Local() when there is none.
func From(ctx context.Context) ConnectionIdentity {
	if id, ok := ctx.Value(ctxKey{}).(ConnectionIdentity); ok {
		return id
	}
	return Local()
}

// TokenEntry is one entry of an --auth-tokens file.
type TokenEntry struct {
	Token     string `json:"token"`
	Principal string `json:"principal"`
	Tenant    string `json:"tenant"`
	ExpiresAt string `json:"expiresAt"`
}

// Tokens resolves identities from bearer tokens.
type Tokens struct {
	entries []tokenIdentity
	now     func() time.Time
}

type tokenIdentity struct {
	token []byte
	id    ConnectionIdentity
}

// LoadTokens reads a JSON array of {"token","principal","tenant","expiresAt"}
// (all required, expiresAt in RFC 3339).
func LoadTokens(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read auth tokens: %w", err)
	}
	return ParseTokens(data)
}

// ParseTokens parses the token file format.
func ParseTokens(data []byte) (*Tokens, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var raw []TokenEntry
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("auth tokens: want a JSON array of {token, principal, tenant, expiresAt}: %w", err)
	}
	t := &Tokens{now: time.Now}
	seen := map[string]bool{}
	for i, e := range raw {
		if e.Token == "" || e.Principal == "" || e.Tenant == "" || e.ExpiresAt == "" {
			return nil, fmt.Errorf("auth tokens: entry %d: token, principal, tenant and expiresAt are all required", i)
		}
		exp, err := time.Parse(time.RFC3339, e.ExpiresAt)
		if err != nil {
			return nil, fmt.Errorf("auth tokens: entry %d: expiresAt is not RFC 3339: %w", i, err)
		}
		if seen[e.Token] {
			return nil, fmt.Errorf("auth tokens: entry %d: duplicate token", i)
		}
		seen[e.Token] = true
		t.entries = append(t.entries, tokenIdentity{
			token: []byte(e.Token),
			id:    ConnectionIdentity{Principal: e.Principal, Tenant: e.Tenant, ExpiresAt: exp},
		})
	}
	return t, nil
}

// SetClock replaces the clock used to reject already-expired tokens.
func (t *Tokens) SetClock(now func() time.Time) { t.now = now }

// Validate resolves a raw token (however it arrived) to its identity.
func (t *Tokens) Validate(token string) (ConnectionIdentity, error) {
	tok := []byte(token)
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(e.token, tok) == 1 {
			if e.id.ExpiredAt(t.now()) {
				return ConnectionIdentity{}, refuse("the --auth-tokens token of principal " + e.id.Principal + " expired at " + e.id.ExpiresAt.Format(time.RFC3339))
			}
			return e.id, nil
		}
	}
	return ConnectionIdentity{}, refuse("the token is not in the --auth-tokens file")
}

// Resolve checks the Authorization: Bearer header.
func (t *Tokens) Resolve(r *http.Request) (ConnectionIdentity, error) { return Bearer(t).Resolve(r) }

// Validator checks a raw bearer token, whatever carried it (the
// Authorization header, a WebSocket subprotocol), and returns the
// identity it names or ErrUnauthorized.
type Validator interface {
	Validate(token string) (ConnectionIdentity, error)
}

// BearerToken returns the token of an "Authorization: Bearer" header.
func BearerToken(r *http.Request) (string, bool) {
	if r == nil {
		return "", false
	}
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(prefix):])
	return tok, tok != ""
}

// Bearer resolves identities from the Authorization: Bearer header with v.
func Bearer(v Validator) Resolver {
	return ResolverFunc(func(r *http.Request) (ConnectionIdentity, error) {
		tok, ok := BearerToken(r)
		if !ok {
			return ConnectionIdentity{}, refuse("no bearer token (Authorization header or WebSocket subprotocol)")
		}
		return v.Validate(tok)
	})
}

// AnyOf accepts a token any of vs accepts, asking them in order.
func AnyOf(vs ...Validator) Validator { return anyOf(vs) }

type anyOf []Validator

func (a anyOf) Validate(token string) (ConnectionIdentity, error) {
	errs := make([]error, 0, len(a))
	for _, v := range a {
		id, err := v.Validate(token)
		if err == nil {
			return id, nil
		}
		errs = append(errs, err)
	}
	return ConnectionIdentity{}, refuse(joinReasons(errs))
}
