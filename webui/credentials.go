package webui

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
)

// Kinds of credential a server takes, which the sign-in box names: bearer
// tokens of its --auth-tokens file, and JWTs (--auth-jwt).
const (
	CredentialToken = "token"
	CredentialJWT   = "jwt"
)

// charsetMeta is the app page's first head element; the credentials meta
// goes after it.
var charsetMeta = []byte(`<meta charset="utf-8">`)

// WithCredentials returns a handler whose app page tells the sign-in box
// which kinds of credential the server takes (CredentialToken,
// CredentialJWT; others are dropped), as <meta name="oecp-credentials">.
// The page is static otherwise: the kinds are the server's configuration,
// not anyone's secret.
func (h *Handler) WithCredentials(kinds ...string) *Handler {
	var known []string
	for _, k := range kinds {
		if (k == CredentialToken || k == CredentialJWT) && !slices.Contains(known, k) {
			known = append(known, k)
		}
	}
	out := &Handler{files: maps.Clone(h.files)}
	if len(known) == 0 {
		return out
	}
	page := out.files["index.html"]
	meta := []byte(`<meta name="oecp-credentials" content="` + joinSpace(known) + `">`)
	body := bytes.Replace(page.body, charsetMeta, append(append(slices.Clone(charsetMeta), '\n'), meta...), 1)
	sum := sha256.Sum256(body)
	page.body, page.etag = body, `"`+hex.EncodeToString(sum[:12])+`"`
	out.files["index.html"] = page
	return out
}

func joinSpace(ss []string) string {
	var b bytes.Buffer
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String()
}
