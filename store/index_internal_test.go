package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestIndexEncodeIsJSONMarshal: an index encodes to exactly the bytes
// json.Marshal gives it, over random entries drawn from plain ASCII, NUL,
// quotes, backslashes, control and HTML characters and non-ASCII text.
func TestIndexEncodeIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Z", "0", "-", ".", ":", "\x00", "\"", "\\", "\n", "\t", "\x01", "\x1f", "\x7f",
		"<", ">", "&", "é", "\u2028", "\ufffd", "\xff", " ", "/", "n:\"alice\"\x00run-1"}
	for round := range 3000 {
		ix := Index{}
		for range rng.IntN(12) {
			var k string
			for range rng.IntN(8) {
				k += alphabet[rng.IntN(len(alphabet))]
			}
			ix[k] = rng.Uint64N(1 << 40)
		}
		want, err := json.Marshal(ix)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ix.encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: %q, json.Marshal gives %q", round, got, want)
		}
	}
}
