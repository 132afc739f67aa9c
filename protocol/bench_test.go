package protocol_test

import (
	"testing"

	"github.com/oecp/oecp/protocol"
)

// BenchmarkDecodeFrame measures the per-request inbound decode of a typical
// request, a cancel notification and a duplicate-key frame.
func BenchmarkDecodeFrame(b *testing.B) {
	frames := map[string][]byte{
		"request":   []byte(`{"jsonrpc":"2.0","id":7,"method":"get","params":{"atCursor":"cursor-12"}}`),
		"cancel":    []byte(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"req-1"}}`),
		"duplicate": []byte(`{"jsonrpc":"2.0","id":1,"id":2,"method":"get","params":{}}`),
	}
	for name, frame := range frames {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if f := protocol.DecodeFrame(frame); f.Kind == protocol.FrameParseError {
					b.Fatal("parse error")
				}
			}
		})
	}
}
