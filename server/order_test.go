package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/wiretest"
)

// TestInPlaceAnswersKeepFrameOrder: answers the reader produces itself —
// in-place get answers, DUPLICATE_REQUEST_ID, parse errors, Method not
// found — reach the peer in the order of the frames they answer, while
// another request is in flight on its own goroutine: queued on NDJSON,
// written in place without waiting over WebSocket when the connection is
// idle.
func TestInPlaceAnswersKeepFrameOrder(t *testing.T) {
	opts := wiretest.Options{
		InlineReads: true,
		// Held on its own goroutine until cancelled.
		FaultDelay: map[string]time.Duration{"initialize": time.Hour},
	}
	t.Run("ndjson", func(t *testing.T) {
		w := wiretest.NewPipe(t, newScript(), opts)
		inPlaceRounds(t, w, func() { waitIdle(t, w, 0, 0, 0) })
	})
	t.Run("websocket", func(t *testing.T) {
		inPlaceRounds(t, wiretest.NewWSServer(t, newScript(), opts).Dial(t, nil), func() {})
	})
}

func inPlaceRounds(t *testing.T, w wiretest.Wire, settle func()) {
	const held = `{"jsonrpc":"2.0","id":"held","method":"initialize","params":{"protocolVersion":"openengine.cluster/v1"}}`
	const parse = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	for round := 0; round < 200; round++ {
		send(t, w, held)
		id := func(n int) string { return fmt.Sprintf("r%d-%d", round, n) }
		send(t, w,
			getReq("held", ""),
			getReq(id(1), ""),
			`{`,
			getReq(id(2), ""),
			`{"jsonrpc":"2.0","id":"`+id(3)+`","method":"nope","params":{}}`,
			getReq(id(4), ""),
			cancelReq("held"),
		)
		for _, want := range []string{
			dupResp("held"),
			getResp(id(1)),
			parse,
			getResp(id(2)),
			`{"jsonrpc":"2.0","id":"` + id(3) + `","error":{"code":-32601,"message":"Method not found"}}`,
			getResp(id(4)),
		} {
			expect(t, w, want)
		}
		settle()
	}
}
