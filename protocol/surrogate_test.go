package protocol_test

import (
	"testing"

	"github.com/oecp/oecp/protocol"
)

// TestLoneSurrogateEscapeIsAParseError: a \u escape of an unpaired UTF-16
// surrogate anywhere in a frame is a parse error, so "\ud800x", "\udbffx"
// and "\ufffdx" can never become the same request id.
func TestLoneSurrogateEscapeIsAParseError(t *testing.T) {
	for _, tc := range []struct {
		frame string
		kind  protocol.FrameKind
	}{
		{`{"jsonrpc":"2.0","id":"\ud800x","method":"get","params":{}}`, protocol.FrameParseError},
		{`{"jsonrpc":"2.0","id":"\udbffx","method":"get","params":{}}`, protocol.FrameParseError},
		{`{"jsonrpc":"2.0","id":"\udc00","method":"get","params":{}}`, protocol.FrameParseError},
		{`{"jsonrpc":"2.0","id":"\uD800\u0041","method":"get","params":{}}`, protocol.FrameParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"get","params":{"x":"\ud83d"}}`, protocol.FrameParseError},
		{`{"jsonrpc":"2.0","id":"\ud83d\ude00","method":"get","params":{}}`, protocol.FrameRequest},
		{`{"jsonrpc":"2.0","id":"\ufffdx","method":"get","params":{}}`, protocol.FrameRequest},
		{`{"jsonrpc":"2.0","id":"\\ud800x","method":"get","params":{}}`, protocol.FrameRequest},
		{`{"jsonrpc":"2.0","id":"\\\ud83d\ude00","method":"get","params":{}}`, protocol.FrameRequest},
	} {
		if got := protocol.DecodeFrame([]byte(tc.frame)); got.Kind != tc.kind {
			t.Errorf("%s: kind %v, want %v", tc.frame, got.Kind, tc.kind)
		}
	}
}
