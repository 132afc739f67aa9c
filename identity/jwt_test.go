package identity_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	ws "github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// signer is a key generated for the test, with its kid and algorithm.
type signer struct {
	kid    string
	method jwt.SigningMethod
	key    crypto.Signer
}

func newSigner(t *testing.T, kid string, method jwt.SigningMethod) signer {
	t.Helper()
	var key crypto.Signer
	var err error
	switch method {
	case jwt.SigningMethodRS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case jwt.SigningMethodES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, method: method, key: key}
}

// jwks encodes the public keys as a JWK Set.
func jwks(t *testing.T, ss ...signer) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, s := range ss {
		k, err := jwkset.NewJWKFromKey(s.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: s.kid, ALG: jwkset.ALG(s.method.Alg())}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, k.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// claims are a valid token's claims at now.
func claims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"iss": "https://idp.example/", "aud": "oecp", "sub": "alice", "tenant": "acme",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

func (s signer) sign(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.method, c)
	tok.Header["kid"] = s.kid
	out, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeJWTConfig(t *testing.T, jwksJSON []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), jwksJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "jwt.json")
	body := `{"issuer":"https://idp.example/","audience":"oecp","jwks":"keys.json","algorithms":["RS256","ES256","EdDSA"]}`
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// countingGets counts the backend calls that get through.
type countingGets struct {
	server.EmptyBackend
	calls atomic.Int64
}

func (b *countingGets) Get(ctx context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	b.calls.Add(1)
	return b.EmptyBackend.Get(ctx, p)
}

// TestJWTOverWebSocket: a valid token of each algorithm upgrades, with
// exp as the connection's expiry; an expired token, a wrong issuer, a
// wrong audience, an unknown key, alg none and HS256 keyed with the
// public key are each refused with HTTP 401 and nothing reaches the
// backend.
func TestJWTOverWebSocket(t *testing.T) {
	rs, es, ed := newSigner(t, "rs", jwt.SigningMethodRS256), newSigner(t, "es", jwt.SigningMethodES256), newSigner(t, "ed", jwt.SigningMethodEdDSA)
	stranger := newSigner(t, "rs", jwt.SigningMethodRS256) // same kid, key not in the set
	v, err := identity.LoadJWT(writeJWTConfig(t, jwks(t, rs, es, ed)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	now := time.Now()
	b := &countingGets{}
	srv := wiretest.NewWSServer(t, b, wiretest.Options{Resolver: v})

	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := claims(now)
		edit(c)
		return c
	}
	pubDER, err := x509.MarshalPKIXPublicKey(rs.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(now))
	hs.Header["kid"] = "rs"
	hsTok, _ := hs.SignedString(pubDER)
	noneTok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(now)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	refused := map[string]string{
		"expired": rs.sign(t, with(func(c jwt.MapClaims) {
			c["exp"] = now.Add(-time.Hour).Unix()
			c["iat"] = now.Add(-2 * time.Hour).Unix()
		})),
		"wrong issuer":    rs.sign(t, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example/" })),
		"wrong audience":  rs.sign(t, with(func(c jwt.MapClaims) { c["aud"] = "someone-else" })),
		"unknown key":     stranger.sign(t, claims(now)),
		"alg none":        noneTok,
		"HS256 pubkey":    hsTok,
		"no tenant claim": rs.sign(t, with(func(c jwt.MapClaims) { delete(c, "tenant") })),
		"no exp":          rs.sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") })),
	}
	for name, tok := range refused {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+tok)
		_, resp, err := ws.Dial(context.Background(), srv.URL, &ws.DialOptions{HTTPHeader: h})
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: err=%v resp=%v; want HTTP 401", name, err, resp)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("%d calls reached the backend from refused tokens", n)
	}
	for _, s := range []signer{rs, es, ed} {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+s.sign(t, claims(now)))
		w := srv.Dial(t, h)
		if err := w.Send(`{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatalf("%s: %v", s.method.Alg(), err)
		}
	}
	id, err := v.Validate(es.sign(t, claims(now)))
	if err != nil || id.Principal != "alice" || id.Tenant != "acme" || id.ExpiresAt.Unix() != now.Add(time.Hour).Unix() {
		t.Fatalf("identity %+v, %v", id, err)
	}
}

// TestJWKSURLRefreshesOnUnknownKid: a key set served over https is
// fetched at start and fetched again when a token names a kid it lacks
// (a key rotation at the issuer).
func TestJWKSURLRefreshesOnUnknownKid(t *testing.T) {
	old, rotated := newSigner(t, "k1", jwt.SigningMethodES256), newSigner(t, "k2", jwt.SigningMethodES256)
	var mu sync.Mutex
	served := jwks(t, old)
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(served)
	}))
	defer idp.Close()
	v, err := identity.NewJWT(identity.JWTConfig{Issuer: "https://idp.example/", Audience: "oecp", JWKS: idp.URL + "/jwks", HTTPClient: idp.Client()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	now := time.Now()
	if _, err := v.Validate(old.sign(t, claims(now))); err != nil {
		t.Fatalf("token of the first key: %v", err)
	}
	mu.Lock()
	served = jwks(t, old, rotated)
	mu.Unlock()
	if _, err := v.Validate(rotated.sign(t, claims(now))); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
}

func TestJWTConfigIsChecked(t *testing.T) {
	for _, cfg := range []identity.JWTConfig{
		{Audience: "a", JWKS: "k.json"},
		{Issuer: "i", Audience: "a", JWKS: "k.json", Algorithms: []string{"HS256"}},
		{Issuer: "i", Audience: "a", JWKS: "http://idp.example/jwks"},
		{Issuer: "i", Audience: "a", JWKS: "/does/not/exist.json"},
		{Issuer: "i", Audience: "a", JWKS: "k.json", Leeway: "soon"},
	} {
		if _, err := identity.NewJWT(cfg, nil); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
