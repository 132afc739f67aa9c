package redact

import (
	"encoding/base64"
	"encoding/hex"
	"sort"
	"strings"
)

// MinEncoded is the shortest declared value (in bytes) whose encodings are
// redacted too; a shorter value is redacted only as itself. At this length
// the shortest encoded spelling (the stable core of base64 at an
// alignment) is 10 characters, 60 bits the secret alone decides, and its
// hex is 16 characters; a shorter value's core (4 characters for a 4-byte
// value) would match innocent base64 and prose.
const MinEncoded = 8

// Spellings returns every spelling of the declared values, distinct and
// longest first (so a replacement tries a spelling before any shorter one
// it contains); empty values are ignored. The spellings of a value v are:
//
//   - v itself;
//   - when len(v) >= MinEncoded: its hex, lower and upper case; its base64,
//     standard and URL-safe, each with and without padding; and, in both
//     alphabets, the stable core of each of the three alignments v can
//     have inside larger base64-encoded data (see cores).
func Spellings(values []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, v := range values {
		add(v)
		if len(v) < MinEncoded {
			continue
		}
		h := hex.EncodeToString([]byte(v))
		add(h)
		add(strings.ToUpper(h))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			add(enc.EncodeToString([]byte(v)))
			raw := enc.WithPadding(base64.NoPadding)
			add(raw.EncodeToString([]byte(v)))
			for _, c := range cores(raw, []byte(v)) {
				add(c)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// cores returns, for each offset mod 3 at which v can begin inside larger
// data encoded with enc (unpadded), the characters v alone decides. Base64
// turns each 3 bytes into 4 characters of 6 bits, so v's encoding inside a
// blob depends on where v starts within its 3-byte group, and the
// characters at its two ends mix v's bits with its neighbours'. Character
// j holds bits [6j, 6j+6); with v's bits at [8a, 8a+8n) (a bytes before
// it in its group), the characters from ceil(8a/6) to floor((8a+8n)/6)
// hold v's bits only, whatever surrounds it.
func cores(enc *base64.Encoding, v []byte) []string {
	out := make([]string, 0, 3)
	for a := range 3 {
		buf := make([]byte, a+len(v))
		copy(buf[a:], v)
		s := enc.EncodeToString(buf)
		first, end := (8*a+5)/6, (8*a+8*len(v))/6
		out = append(out, s[first:end])
	}
	return out
}
