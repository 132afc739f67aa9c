package harness_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/oecp/oecp/engine/harness"
)

// An agent that prints its declared key hex- or base64-encoded (standard
// or URL-safe, padded or not), or inside larger base64 data at any of the
// three alignments, leaves [REDACTED] in its place in the execution's log
// lines and live output.
func TestDeclaredValueEncodingsAreRedactedFromLiveOutput(t *testing.T) {
	key := "sk-???~~~-0123456789-harness" // its standard base64 has '/' and '+'
	t.Setenv("HARNESS_TEST_KEY", key)
	b := []byte(key)
	var lines, want []string
	for i, s := range []string{key, hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)),
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)} {
		lines, want = append(lines, fmt.Sprintf("leak %d %s", i, s)), append(want, fmt.Sprintf("leak %d [REDACTED]", i))
	}
	for a := range 3 {
		prefix := strings.Repeat("P", 3+a)
		blob := base64.StdEncoding.EncodeToString([]byte(prefix + key + "zz, the rest"))
		first, end := (8*len(prefix)+5)/6, 8*(len(prefix)+len(key))/6
		lines, want = append(lines, "blob "+blob), append(want, "blob "+blob[:first]+"[REDACTED]"+blob[end:])
	}
	f := newFake(t)
	f.write("agent.sh", "#!/bin/sh\ncat > /dev/null\nprintf '%s\\n' '"+strings.Join(lines, "' '")+"' >&2\n"+
		`printf '%s\n' '{"session":"s","text":"{\"text\":\"better\"}"}'`+"\n")
	rec := &recorder{}
	got := run(f.runner("HARNESS_TEST_KEY"), context.Background(), f.job(textStep(t), harness.Binding{Model: "m", Env: []string{"HARNESS_TEST_KEY"}}), `{"text":"draft"}`, rec)
	if s := outcome(got); s != wantVerified {
		t.Fatalf("outcome %s\n%s", s, rec.text())
	}
	for _, w := range want {
		if !rec.has("info: "+w) || !rec.has("out: "+w) {
			t.Errorf("the logs or live output lack %q:\n%s", w, rec.text())
		}
	}
}
