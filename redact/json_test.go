package redact_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oecp/oecp/redact"
)

// A declared value in a JSON value is redacted from every string, keys
// included, however the JSON spells it (escaped, \u-escaped, base64 with
// '/' written as \/); numbers keep their digits, and a value that holds
// no spelling is returned byte for byte.
func TestJSONRedactsEveryStringSpelling(t *testing.T) {
	key := "sk-???~~~-0123456789" // standard base64 "c2stPz8/fn5+LTAxMjM0NTY3ODk="
	b64 := base64.StdEncoding.EncodeToString([]byte(key))
	if !strings.Contains(b64, "/") {
		t.Fatalf("the test's key has no '/' in base64: %s", b64)
	}
	s := redact.New([]string{key, `sk-"quoted"-<1>`})
	for name, c := range map[string]struct{ in, want string }{
		"plain":     {`{"text":"key: sk-???~~~-0123456789"}`, `{"text":"key: [REDACTED]"}`},
		"escaped":   {`{"m":"echo sk-\"quoted\"-\u003c1\u003e"}`, `{"m":"echo [REDACTED]"}`},
		"html kept": {`{"m":"echo sk-\"quoted\"-<1>"}`, `{"m":"echo [REDACTED]"}`},
		"key":       {`{"k sk-???~~~-0123456789":1}`, `{"k [REDACTED]":1}`},
		"list":      {`["\u0073k-\"quoted\"-<1>",12345678901234567890]`, `["[REDACTED]",12345678901234567890]`},
		"slash":     {`{"b64":"` + strings.ReplaceAll(b64, "/", `\/`) + `"}`, `{"b64":"[REDACTED]"}`},
		"untouched": {`{ "a" : [1, 2.50] }`, `{ "a" : [1, 2.50] }`},
		"not json":  {`{"a": sk-???~~~-0123456789`, `{"a": [REDACTED]`},
	} {
		if got := s.JSON(json.RawMessage(c.in)); string(got) != c.want {
			t.Errorf("%s: %s, want %s", name, got, c.want)
		}
	}
	other := redact.New([]string{"sk-plain-key-value"}) // no spelling has a '/'
	if plain := `{"path":"a\/b","n":1}`; string(other.JSON(json.RawMessage(plain))) != plain {
		t.Errorf("an escaped '/' no spelling has was rewritten: %s", other.JSON(json.RawMessage(plain)))
	}
	var none *redact.Secrets
	if got := none.JSON(json.RawMessage(`{"x":"sk"}`)); string(got) != `{"x":"sk"}` {
		t.Errorf("nil Secrets changed %s", got)
	}
}
