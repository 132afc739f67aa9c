package protocol_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/protocol"
)

// goldenRequests seeds fuzzers with every request line of the goldens.
func goldenRequests(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "oecp-v1", "goldens", "*.ndjson"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files under testdata/oecp-v1 (%v)", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if l != "" {
				f.Add([]byte(l))
			}
		}
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"id":2,"method":"watch","params":{}}`))
}

// FuzzDecodeFrame: the envelope decoder never panics, agrees with
// encoding/json on validity, and a decoded request's id round-trips.
func FuzzDecodeFrame(f *testing.F) {
	goldenRequests(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := protocol.DecodeFrame(data)
		if (fr.Kind == protocol.FrameParseError) != !(json.Valid(data) && utf8.Valid(data)) {
			t.Fatalf("parse error classification disagrees with json.Valid for %q", data)
		}
		if fr.Kind == protocol.FrameRequest {
			b := fr.ID.AppendJSON(nil)
			var back protocol.ID
			if err := back.UnmarshalJSON(b); err != nil || back.Key() != fr.ID.Key() {
				t.Fatalf("id %s does not round-trip", b)
			}
		}
	})
}

// FuzzNormalizeValue: normalisation never panics and is idempotent.
func FuzzNormalizeValue(f *testing.F) {
	goldenRequests(f)
	f.Add([]byte(`{"b":1e300,"a":[-0.0,1.0,"\u2028"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := protocol.NormalizeValue(data)
		if err != nil {
			return
		}
		again, err := protocol.NormalizeValue(v)
		if err != nil || !bytes.Equal(v, again) {
			t.Fatalf("not idempotent: %s -> %s (%v)", v, again, err)
		}
	})
}
