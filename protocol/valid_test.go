package protocol_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/protocol"
)

// reference is what ValidFrame must answer: the three checks it fuses.
func reference(b []byte) bool {
	return utf8.Valid(b) && json.Valid(b) && !protocol.HasLoneSurrogate(b)
}

var validCases = []string{
	``, ` `, `{}`, ` {} `, `[]`, `[ ]`, `{ }`, `[[]]`, `{"a":[]}`, `{"a":{}}`, `{"a":1,}`, `[1,]`, `[,1]`,
	`{"a"}`, `{"a":}`, `{:1}`, `{1:1}`, `{"a" 1}`, `{"a":1 "b":2}`, `["a" "b"]`, `[1}`, `{"a":1]`,
	`0`, `-0`, `01`, `-`, `1.`, `.5`, `1.5`, `1e`, `1e+`, `1e5`, `1E-5`, `-1.5e+10`, `1.e5`, `+1`, `00`, `-01`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `true false`, `nullnull`, `True`,
	`"a"`, `"`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\a"`, `"\u00e9"`, `"\u00E9"`, `"\u00g9"`, `"\u12"`,
	"\"\x01\"", "\"\x7f\"", "\"\t\"", "\"é\"", "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"",
	"\xef\xbb\xbf{}", "{}\x00", "\x00", `"\ud800"`, `"\ud800\udc00"`, `"\udc00"`, `"\ud800\ud800\udc00"`,
	`"\ud800x"`, `"\ud800\u0041"`, `"\udbff\udfff"`, `"\uD800\uDC00"`, `"\ud800\`, `"\ud800\u"`,
	`{"jsonrpc":"2.0","id":1,"method":"get","params":{}}`, "{\n\t\"a\" :\r [1 , 2]\n}", `[1,[2,[3,{"x":[null]}]]]`,
	`{"a":"\ud83d\ude00"}`, `{"a":1}}`, `[[]`, `]`, `}`, `{"a":[1,2}`,
}

func TestValidFrameAnswersAsTheThreeChecks(t *testing.T) {
	for _, c := range validCases {
		if got, want := protocol.ValidFrame([]byte(c)), reference([]byte(c)); got != want {
			t.Errorf("ValidFrame(%q) = %v, want %v", c, got, want)
		}
	}
}

func TestValidFrameNestingLimit(t *testing.T) {
	for _, depth := range []int{10000, 10001} {
		for _, inner := range []string{"", "1", "{}"} {
			b := []byte(strings.Repeat("[", depth) + inner + strings.Repeat("]", depth))
			if got, want := protocol.ValidFrame(b), reference(b); got != want {
				t.Errorf("depth %d around %q: %v, want %v", depth, inner, got, want)
			}
		}
		b := []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
		if got, want := protocol.ValidFrame(b), reference(b); got != want {
			t.Errorf("object depth %d: %v, want %v", depth, got, want)
		}
	}
}

// TestValidFrameOnMutations compares ValidFrame with the reference on
// many small mutations (a byte replaced, inserted or deleted) of valid
// frames, from a fixed seed.
func TestValidFrameOnMutations(t *testing.T) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":"a\u00e9\ud83d\ude00","method":"get","params":{"x":[1,-2.5e3,true,false,null,{}]}}`,
		`[{"a":"b\\c\"d"},[[]],0,-0.0,1E+2]`,
	}
	alphabet := []byte("{}[]:,\"\\/ \t\n\r0123456789-+.eEtrufalsn\x01\x7f\xc3\xa9\xed\xa0\xff\xbfud8cDCab")
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200000; n++ {
		b := []byte(seeds[n%len(seeds)])
		for k := 1 + rng.IntN(3); k > 0; k-- {
			i := rng.IntN(len(b))
			switch c := alphabet[rng.IntN(len(alphabet))]; rng.IntN(3) {
			case 0:
				b[i] = c
			case 1:
				b = append(b[:i], append([]byte{c}, b[i:]...)...)
			default:
				b = append(b[:i], b[i+1:]...)
			}
		}
		if got, want := protocol.ValidFrame(b), reference(b); got != want {
			t.Fatalf("ValidFrame(%q) = %v, want %v", b, got, want)
		}
	}
}

func FuzzValidFrame(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := protocol.ValidFrame(b), reference(b); got != want {
			t.Fatalf("ValidFrame(%q) = %v, want %v", b, got, want)
		}
	})
}

func BenchmarkValidFrame(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","id":12345,"method":"get","params":{}}`)
	b.Run("three checks", func(b *testing.B) {
		for b.Loop() {
			reference(frame)
		}
	})
	b.Run("ValidFrame", func(b *testing.B) {
		for b.Loop() {
			protocol.ValidFrame(frame)
		}
	})
}
