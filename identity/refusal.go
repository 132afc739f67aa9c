package identity

import (
	"errors"
	"strings"
)

// refusal is ErrUnauthorized with the reason the token was refused. Its
// text, which reaches the peer, is ErrUnauthorized's: the reason is for the
// server's own log (RefusalReason), and names no token.
type refusal struct{ reason string }

func (r *refusal) Error() string { return ErrUnauthorized.Error() }
func (r *refusal) Unwrap() error { return ErrUnauthorized }

// refuse is ErrUnauthorized because of reason.
func refuse(reason string) error { return &refusal{reason: reason} }

// RefusalReason is why err refused a token: wrong audience, a missing
// tenant claim, expired…; "" when err carries no reason.
func RefusalReason(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return ""
}

// joinReasons is the reasons of several validators' refusals, in order.
func joinReasons(errs []error) string {
	var rs []string
	for _, err := range errs {
		if r := RefusalReason(err); r != "" {
			rs = append(rs, r)
		}
	}
	return strings.Join(rs, "; ")
}
