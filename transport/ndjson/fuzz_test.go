package ndjson_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/ndjson"
)

// FuzzReadFrame: the line reader never panics, never returns a frame over
// the bound or containing a newline, and returns valid UTF-8 only.
func FuzzReadFrame(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "oecp-v1", "goldens", "*.ndjson"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files under testdata/oecp-v1 (%v)", err)
	}
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data)
	}
	f.Add([]byte("a\r\nb\n\n\xff\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := ndjson.New(bytes.NewReader(data), &bytes.Buffer{}, &bytes.Buffer{})
		for i := 0; i < len(data)+2; i++ {
			fr, err := tr.ReadFrame()
			if err == server.ErrFrameTooLarge {
				continue
			}
			if err != nil {
				return
			}
			if len(fr) > 1<<20 || bytes.IndexByte(fr, '\n') >= 0 || !utf8.Valid(fr) {
				t.Fatalf("bad frame %q", fr)
			}
		}
	})
}
