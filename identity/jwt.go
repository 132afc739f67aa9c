package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// JWTConfig is the --auth-jwt file: which issuer's tokens a server
// accepts, for which audience, verified with which keys.
type JWTConfig struct {
	// Issuer and Audience must equal the token's iss and be one of its aud.
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	// JWKS is the issuer's public keys: a JWK Set file (a path relative to
	// the config file's directory, or absolute) or an https:// URL, which
	// is fetched at start, refreshed every RefreshInterval, and refreshed
	// early (at most once a minute) when a token names an unknown kid.
	JWKS string `json:"jwks"`
	// Algorithms the tokens may be signed with (default RS256, ES256,
	// EdDSA); only asymmetric ones are allowed.
	Algorithms []string `json:"algorithms,omitempty"`
	// PrincipalClaim and TenantClaim name the string claims the identity
	// is read from (default "sub" and "tenant"); a token without either is
	// refused.
	PrincipalClaim string `json:"principalClaim,omitempty"`
	TenantClaim    string `json:"tenantClaim,omitempty"`
	// Leeway tolerates clock skew on exp, nbf and iat (default "30s").
	Leeway string `json:"leeway,omitempty"`
	// RefreshInterval of a JWKS URL (default "1h").
	RefreshInterval string `json:"refreshInterval,omitempty"`

	// HTTPClient fetches a JWKS URL (default http.DefaultClient); tests
	// give one that trusts their server.
	HTTPClient *http.Client `json:"-"`
}

// Defaults of JWTConfig.
var (
	DefaultJWTAlgorithms = []string{"RS256", "ES256", "EdDSA"}
	asymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// JWT validates bearer tokens that are JSON Web Tokens signed by a
// configured issuer. Validate is the one token check: the header path
// (Resolve) and any other carrier use it.
type JWT struct {
	cfg    JWTConfig
	keys   keyfunc.Keyfunc
	parser *jwt.Parser
	now    func() time.Time
	stop   context.CancelFunc
}

// LoadJWT reads an --auth-jwt file and starts its key set (Close stops a
// URL's refresh).
func LoadJWT(path string, log *slog.Logger) (*JWT, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --auth-jwt: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var cfg JWTConfig
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("--auth-jwt %s: want a JSON object {issuer, audience, jwks, algorithms, principalClaim, tenantClaim, leeway}: %w", path, err)
	}
	if cfg.JWKS != "" && !strings.HasPrefix(cfg.JWKS, "https://") && !filepath.IsAbs(cfg.JWKS) {
		cfg.JWKS = filepath.Join(filepath.Dir(path), cfg.JWKS)
	}
	return NewJWT(cfg, log)
}

// NewJWT checks cfg, fills its defaults and loads (or starts fetching)
// its key set.
func NewJWT(cfg JWTConfig, log *slog.Logger) (*JWT, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Issuer == "" || cfg.Audience == "" || cfg.JWKS == "" {
		return nil, errors.New("--auth-jwt: issuer, audience and jwks are required")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultJWTAlgorithms
	}
	for _, a := range cfg.Algorithms {
		if !slices.Contains(asymmetricAlgorithms, a) {
			return nil, fmt.Errorf("--auth-jwt: algorithm %q is not allowed: want one of %s", a, strings.Join(asymmetricAlgorithms, ", "))
		}
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = "sub"
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = "tenant"
	}
	leeway, err := durationOr(cfg.Leeway, 30*time.Second, "leeway")
	if err != nil {
		return nil, err
	}
	refresh, err := durationOr(cfg.RefreshInterval, time.Hour, "refreshInterval")
	if err != nil {
		return nil, err
	}
	j := &JWT{cfg: cfg, now: time.Now}
	if j.keys, j.stop, err = keySet(cfg, refresh, log); err != nil {
		return nil, err
	}
	j.parser = jwt.NewParser(
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithLeeway(leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return j.now() }),
	)
	return j, nil
}

func durationOr(s string, def time.Duration, name string) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--auth-jwt: %s %q is not a duration like 30s", name, s)
	}
	return d, nil
}

// keySet loads a JWK Set file, or starts fetching a URL's.
func keySet(cfg JWTConfig, refresh time.Duration, log *slog.Logger) (keyfunc.Keyfunc, context.CancelFunc, error) {
	if !strings.HasPrefix(cfg.JWKS, "https://") {
		if strings.Contains(cfg.JWKS, "://") {
			return nil, nil, fmt.Errorf("--auth-jwt: jwks %q: want a file or an https:// URL", cfg.JWKS)
		}
		raw, err := os.ReadFile(cfg.JWKS)
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-jwt: jwks: %w", err)
		}
		k, err := keyfunc.NewJWKSetJSON(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-jwt: jwks %s: %w", cfg.JWKS, err)
		}
		return k, func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKS}, keyfunc.Override{
		Client:            cfg.HTTPClient,
		HTTPTimeout:       10 * time.Second,
		RefreshInterval:   refresh,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(time.Minute), 1),
		RateLimitWaitMax:  time.Second,
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Error("--auth-jwt: refreshing the key set failed", "url", u, "err", err)
			}
		},
	})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("--auth-jwt: jwks %s: %w", cfg.JWKS, err)
	}
	return k, cancel, nil
}

// SetClock replaces the clock tokens are checked against.
func (j *JWT) SetClock(now func() time.Time) { j.now = now }

// Close stops refreshing a URL's key set.
func (j *JWT) Close() { j.stop() }

// Validate checks a raw token's signature (with an allowed algorithm and
// a key of the set), issuer, audience and times, and returns the identity
// its claims name; exp becomes the identity's ExpiresAt. Every failure is
// ErrUnauthorized; the reason (RefusalReason) is for the server's log,
// not told to the peer.
func (j *JWT) Validate(raw string) (ConnectionIdentity, error) {
	claims := jwt.MapClaims{}
	tok, err := j.parser.ParseWithClaims(raw, claims, j.keys.Keyfunc)
	switch {
	case err != nil:
		// The library's errors name the failed check, never the token.
		return ConnectionIdentity{}, refuse("JWT: " + err.Error())
	case !tok.Valid:
		return ConnectionIdentity{}, refuse("JWT: not valid")
	}
	principal, _ := claims[j.cfg.PrincipalClaim].(string)
	tenant, _ := claims[j.cfg.TenantClaim].(string)
	exp, err := claims.GetExpirationTime()
	switch {
	case principal == "":
		return ConnectionIdentity{}, refuse(fmt.Sprintf("JWT: no principal claim %q (a non-empty string)", j.cfg.PrincipalClaim))
	case tenant == "":
		return ConnectionIdentity{}, refuse(fmt.Sprintf("JWT: no tenant claim %q (a non-empty string)", j.cfg.TenantClaim))
	case err != nil || exp == nil:
		return ConnectionIdentity{}, refuse("JWT: no exp claim")
	}
	id := ConnectionIdentity{Principal: principal, Tenant: tenant, ExpiresAt: exp.Time}
	if iat, err := claims.GetIssuedAt(); err == nil && iat != nil {
		id.IssuedAt = iat.Time
	}
	return id, nil
}

// Resolve checks the Authorization: Bearer header.
func (j *JWT) Resolve(r *http.Request) (ConnectionIdentity, error) { return Bearer(j).Resolve(r) }
