package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestCLIAuthJWT: `oecp serve --auth-jwt` accepts a JWT of its issuer
// carried unchanged by --token-file and $OECP_TOKEN, and refuses one of
// another audience.
func TestCLIAuthJWT(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b64 := base64.RawURLEncoding.EncodeToString
	jwk := fmt.Sprintf(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","alg":"ES256","x":%q,"y":%q}]}`,
		b64(key.X.FillBytes(make([]byte, 32))), b64(key.Y.FillBytes(make([]byte, 32))))
	files := map[string]string{
		"jwks.json": jwk,
		"jwt.json":  `{"issuer":"https://idp.example/","audience":"oecp","jwks":"jwks.json","algorithms":["ES256"],"tenantClaim":"org"}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sign := func(aud string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": "https://idp.example/", "aud": aud,
			"sub": "alice", "org": "acme", "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	srv := startServer(t, "--auth-jwt", filepath.Join(dir, "jwt.json"))
	good, other := filepath.Join(dir, "good"), filepath.Join(dir, "other")
	_ = os.WriteFile(good, []byte(sign("oecp")+"\n"), 0o600)
	_ = os.WriteFile(other, []byte(sign("not-oecp")+"\n"), 0o600)
	expect(t, oecp(t, srv, "get", "--token-file", good), 0, []string{"phase:"}, nil)
	expect(t, oecp(t, srv, "get", "--token-file", other), 2, nil, []string{"401"})
	cmd := exec.Command(oecpBin, "get")
	cmd.Env = append(cliEnv(srv), "OECP_TOKEN="+sign("oecp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("get with OECP_TOKEN: %v %s", err, out)
	}
}
