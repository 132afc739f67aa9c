package redact_test

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/oecp/oecp/redact"
)

// secret's standard base64 holds '+' and '/', so its URL-safe spellings
// differ; "??>~~~" encodes to "Pz8+fn5+".
const secret = "sk-??>~~~-0123456789"

// Each whole encoding of a declared value, standing alone in a line, is
// replaced by the marker and nothing around it changes.
func TestEveryEncodingOfADeclaredValueIsRedacted(t *testing.T) {
	s := redact.New([]string{secret})
	b := []byte(secret)
	for name, spelling := range map[string]string{
		"plain":           secret,
		"hex":             hex.EncodeToString(b),
		"HEX":             strings.ToUpper(hex.EncodeToString(b)),
		"base64":          base64.StdEncoding.EncodeToString(b),
		"base64 raw":      base64.RawStdEncoding.EncodeToString(b),
		"base64url":       base64.URLEncoding.EncodeToString(b),
		"base64url raw":   base64.RawURLEncoding.EncodeToString(b),
		"in a JSON value": `"` + base64.StdEncoding.EncodeToString(b) + `"`,
	} {
		got := s.Replace("key=" + spelling + " end")
		want := "key=" + strings.Replace(spelling, strings.Trim(spelling, `"`), redact.Marker, 1) + " end"
		if got != want {
			t.Errorf("%s: %q became %q, want %q", name, spelling, got, want)
		}
	}
	if std, url := base64.StdEncoding.EncodeToString(b), base64.URLEncoding.EncodeToString(b); std == url {
		t.Fatalf("the test's secret spells the same in both alphabets: %s", std)
	}
}

// A declared value inside larger base64-encoded data is caught at each of
// the three offsets mod 3 it can start at, in both alphabets and whatever
// its length mod 3: exactly the characters the secret alone decides are
// replaced, those mixing its bits with its neighbours' are kept.
func TestSecretInsideBase64AtEveryAlignment(t *testing.T) {
	for _, v := range []string{secret, secret + "a", secret + "ab"} {
		s := redact.New([]string{v})
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for a := range 3 {
				prefix := strings.Repeat("P", 6+a) // a bytes before the secret in its group
				data := prefix + v + "zz, and more data after it"
				blob := enc.EncodeToString([]byte(data))
				p, n := len(prefix), len(v)
				first, end := (8*p+5)/6, (8*(p+n))/6
				want := blob[:first] + redact.Marker + blob[end:]
				if got := s.Replace("blob " + blob + "\n"); got != "blob "+want+"\n" {
					t.Errorf("len %d, alignment %d: %s\nbecame %s\nwant   %s", n, a, blob, got, want)
				}
			}
		}
	}
}

// A value shorter than MinEncoded is redacted only as itself: its
// encodings are short enough to match innocent text.
func TestShortValueIsRedactedOnlyAsItself(t *testing.T) {
	short := "abc1234"
	if len(short) >= redact.MinEncoded {
		t.Fatal("the test's value is not short")
	}
	if got := redact.Spellings([]string{short}); !slices.Equal(got, []string{short}) {
		t.Fatalf("spellings %q", got)
	}
	enc := base64.StdEncoding.EncodeToString([]byte(short))
	if got := redact.New([]string{short}).Replace(short + " " + enc); got != redact.Marker+" "+enc {
		t.Fatalf("got %q", got)
	}
}

// Spellings are distinct and longest first, so a replacement prefers the
// whole padded encoding over the shorter ones it contains (the "base64"
// case above keeps no '='); empty values are ignored and nil Secrets
// redact nothing.
func TestSpellingsAreDistinctLongestFirst(t *testing.T) {
	sp := redact.Spellings([]string{secret, "", secret})
	for i := 1; i < len(sp); i++ {
		if len(sp[i]) > len(sp[i-1]) {
			t.Fatalf("not longest first: %q", sp)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(sp)))) != len(sp) {
		t.Fatalf("not distinct: %q", sp)
	}
	if redact.New([]string{"", ""}) != nil || redact.Spellings(nil) != nil {
		t.Fatal("no value must give no secrets")
	}
	var none *redact.Secrets
	if none.Replace(secret) != secret || none.Spellings() != nil {
		t.Fatal("nil secrets changed text")
	}
}
