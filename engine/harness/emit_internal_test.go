package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/worker"
)

// TestEmitEndsOnTextThatIsNotUTF8: text whose first chunk holds no rune
// start (bytes that are not UTF-8) is still published in pieces of at
// most chunkBytes, all of it, instead of looping on an empty piece.
func TestEmitEndsOnTextThatIsNotUTF8(t *testing.T) {
	for name, text := range map[string]string{
		"continuation bytes": strings.Repeat("\x80", 3*chunkBytes+5),
		"after a rune":       "é" + strings.Repeat("\xbf", 2*chunkBytes),
		"UTF-8":              strings.Repeat("€", chunkBytes),
	} {
		t.Run(name, func(t *testing.T) {
			var pieces []string
			done := make(chan struct{})
			go func() {
				defer close(done)
				emit(worker.Sinks{Log: func(_, m string) { pieces = append(pieces, m) }}, streamSystem, text)
			}()
			select {
			case <-done:
			case <-time.After(2 * time.Minute): // a hang guard, no timing assertion
				t.Fatal("emit never returned")
			}
			for _, p := range pieces {
				if p == "" {
					t.Fatal("an empty piece was published")
				}
			}
			if len(pieces) < len(text)/chunkBytes {
				t.Fatalf("%d pieces for %d bytes", len(pieces), len(text))
			}
		})
	}
}
