package redact_test

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/oecp/oecp/redact"
)

// FuzzReplace redacts any text for any declared value. No spelling that
// the marker cannot help form is left in the output, text holding no
// spelling is unchanged, and a value of at least MinEncoded bytes is
// redacted from the hex and every base64 encoding of any data around it.
func FuzzReplace(f *testing.F) {
	f.Add(secret, "key "+secret+" and "+base64.StdEncoding.EncodeToString([]byte("x"+secret)), []byte("ab"), []byte("c"))
	f.Add("sk-12345678", "", []byte{}, []byte{0xff})
	f.Add("abc", "aabcabc", []byte("\x00"), []byte("zz"))
	f.Add("RED", "[REDACTED]", []byte(nil), []byte(nil))
	f.Fuzz(func(t *testing.T, value, text string, before, after []byte) {
		s := redact.New([]string{value})
		if value == "" {
			if s != nil || s.Replace(text) != text {
				t.Fatal("an empty value redacts")
			}
			return
		}
		out := s.Replace(text)
		found := false
		for _, sp := range s.Spellings() {
			found = found || strings.Contains(text, sp)
			if !strings.ContainsAny(sp, redact.Marker) && strings.Contains(out, sp) {
				t.Fatalf("spelling %q left in %q", sp, out)
			}
		}
		if !found && out != text {
			t.Fatalf("text without a spelling changed: %q -> %q", text, out)
		}
		if len(value) < redact.MinEncoded {
			return
		}
		data := append(append(append([]byte{}, before...), value...), after...)
		for name, enc := range map[string]string{
			"hex":           hex.EncodeToString(data),
			"HEX":           strings.ToUpper(hex.EncodeToString(data)),
			"base64":        base64.StdEncoding.EncodeToString(data),
			"base64 raw":    base64.RawStdEncoding.EncodeToString(data),
			"base64url":     base64.URLEncoding.EncodeToString(data),
			"base64url raw": base64.RawURLEncoding.EncodeToString(data),
		} {
			if s.Replace(enc) == enc {
				t.Fatalf("%s of %d bytes around the value is not redacted: %s", name, len(data), enc)
			}
		}
	})
}
