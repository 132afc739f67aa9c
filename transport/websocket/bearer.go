package websocket

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Browsers cannot set an Authorization header on a WebSocket, so a client
// may offer its bearer token as a subprotocol instead:
//
//	Sec-WebSocket-Protocol: oecp.bearer.<token in unpadded base64url>, oecp
//
// The upgrade then resolves the identity as if the request carried
// "Authorization: Bearer <token>", so every Resolver accepts it unchanged.
// An Authorization header, when present, wins and the subprotocol token is
// ignored. The server selects only Subprotocol, never echoes the token
// subprotocol, and neither logs nor answers with the token.
const (
	// Subprotocol is the one subprotocol the upgrade selects when offered.
	Subprotocol = "oecp"
	// BearerSubprotocolPrefix starts a subprotocol that carries a token.
	BearerSubprotocolPrefix = "oecp.bearer."
)

var errBearerSubprotocol = errors.New("the token subprotocol is malformed or repeated")

// withSubprotocolBearer returns r unchanged when it has an Authorization
// header or offers no token subprotocol, and otherwise a copy of r whose
// Authorization header carries the offered token.
func withSubprotocolBearer(r *http.Request) (*http.Request, error) {
	if r.Header.Get("Authorization") != "" {
		return r, nil
	}
	var token string
	found := false
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			enc, ok := strings.CutPrefix(strings.TrimSpace(p), BearerSubprotocolPrefix)
			if !ok {
				continue
			}
			b, err := base64.RawURLEncoding.DecodeString(enc)
			if found || err != nil || len(b) == 0 {
				return nil, errBearerSubprotocol
			}
			token, found = string(b), true
		}
	}
	if !found {
		return r, nil
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+token)
	return r2, nil
}
