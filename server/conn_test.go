package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/server"
)

// TestDuplicateInFlightIDIsRejected: a second request with an in-flight id
// gets DUPLICATE_REQUEST_ID at once; the original still completes.
func TestDuplicateInFlightIDIsRejected(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		whileGetHeld(t, b, w, 1, func() {
			send(t, w, getReq(1, ""))
			expect(t, w, dupResp(1))
		})
	})
}

// TestStringAndIntegerIDsAreDistinct: "1" and 1 are different ids.
func TestStringAndIntegerIDsAreDistinct(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	whileGetHeld(t, b, w, 1, func() {
		send(t, w, getReq("1", ""))
		expect(t, w, getResp("1"))
	})
}

// TestServerBusyAtTheTaskLimit: 256 in-flight requests fill every slot;
// the 257th is answered SERVER_BUSY immediately.
func TestServerBusyAtTheTaskLimit(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		for i := 0; i < 256; i++ {
			send(t, w, getReq(i, fmt.Sprintf("gate:%d", i)))
		}
		for i := 0; i < 256; i++ {
			testkit.Recv(t, b.Started(fmt.Sprintf("gate:%d", i)))
		}
		send(t, w, getReq(256, ""))
		expect(t, w, busyResp(256))
		// A malformed id-less frame is dropped silently at saturation;
		// the busy answer to the next request proves the reader has
		// handled (and dropped) it before any slot frees up.
		send(t, w, `{`, getReq("after-parse", ""))
		expect(t, w, busyResp("after-parse"))
		for i := 0; i < 256; i++ {
			b.Open(fmt.Sprintf("gate:%d", i))
		}
		seen := map[string]bool{}
		for i := 0; i < 256; i++ {
			seen[recv(t, w)] = true
		}
		for i := 0; i < 256; i++ {
			if !seen[getResp(i)] {
				t.Fatalf("missing response for %d", i)
			}
		}
		// The dropped parse error never arrives: the next frame is the
		// answer to a fresh request.
		roundTrip(t, w, "after")
	})
}

// TestWrongVersionEnvelopeRetainsDuplicateIDPrecedence.
func TestWrongVersionEnvelopeRetainsDuplicateIDPrecedence(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		whileGetHeld(t, b, w, 1, func() {
			send(t, w, `{"jsonrpc":"1.0","id":1,"method":"watch","params":{}}`)
			expect(t, w, dupResp(1))
		})
	})
}

// TestWrongVersionSubscriptionMethodsAreInvalidRequests mirrors the
// reference test of the same name: wrong versions are Invalid Request,
// duplicated envelope keys are -32601 with the last id, and none of them
// reaches the backend; an unknown top-level member is ignored.
func TestWrongVersionSubscriptionMethodsAreInvalidRequests(t *testing.T) {
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		for _, m := range []string{"watch", "logs", "agent/attach"} {
			send(t, w, `{"jsonrpc":"1.0","id":41,"method":"`+m+`","params":{}}`)
			expect(t, w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`)
		}
		variants := []string{
			`{"jsonrpc":"2.0","jsonrpc":"2.0","id":51,"method":"watch","params":{}}`,
			`{"jsonrpc":"2.0","id":50,"id":52,"method":"watch","params":{}}`,
			`{"jsonrpc":"2.0","id":53,"method":"watch","method":"watch","params":{}}`,
			`{"jsonrpc":"2.0","id":54,"method":"watch","params":{},"params":{}}`,
		}
		for i, v := range variants {
			expectID := []int{51, 52, 53, 54}[i]
			send(t, w, v)
			expect(t, w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32601,"message":"Method not found"}}`, expectID))
		}
		if n := b.SubCalls(); n != 0 {
			t.Fatalf("backend saw %d subscription calls, want 0", n)
		}
		send(t, w, `{"jsonrpc":"2.0","id":201,"method":"watch","params":{},"extension":true}`)
		expect(t, w, `{"jsonrpc":"2.0","id":201,"error":{"code":-32000,"message":"unexpected watch","data":{"code":"TEST"}}}`)
		if n := b.SubCalls(); n != 1 {
			t.Fatalf("backend saw %d subscription calls, want 1", n)
		}
	})
}

// TestEnvelopeErrorsExactFrames mirrors decoded_dispatch's byte-level
// cases and the portable conformance catalogue.
func TestEnvelopeErrorsExactFrames(t *testing.T) {
	const invalid = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`
	const parse = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	cases := []struct{ in, want string }{
		{`not valid json`, parse},
		{``, parse},
		{`{`, parse},
		{`[]`, invalid},
		{`[{"jsonrpc":"2.0","id":1,"method":"get","params":{}}]`, invalid},
		{`42`, invalid},
		{`{"id":1,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"1.0","id":6,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":{},"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":1.0,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":1e3,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":9223372036854775808,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":null,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":true,"method":"get","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":1,"method":7,"params":{}}`, invalid},
		{`{"jsonrpc":"2.0","method":"subscription/cancel","params":{"subscriptionId":"x","subscriptionId":"y"}}`, invalid},
		{`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1,"id":2}}`, invalid},
		{`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1.5}}`, invalid},
		{`{"jsonrpc":"2.0","method":"something/else","params":{}}`, invalid},
		{`{"jsonrpc":"2.0","id":9223372036854775807,"method":"nope","params":{}}`, `{"jsonrpc":"2.0","id":9223372036854775807,"error":{"code":-32601,"message":"Method not found"}}`},
		{`{"jsonrpc":"2.0","id":-5,"method":"nope","params":[]}`, `{"jsonrpc":"2.0","id":-5,"error":{"code":-32601,"message":"Method not found"}}`},
		{`{"jsonrpc":"2.0","id":"s","method":"nope","params":null}`, `{"jsonrpc":"2.0","id":"s","error":{"code":-32601,"message":"Method not found"}}`},
		{`{"jsonrpc":"2.0","id":"s","method":"nope","params":"x"}`, `{"jsonrpc":"2.0","id":"s","error":{"code":-32601,"message":"Method not found"}}`},
		{`{"jsonrpc":"2.0","id":"s","method":"nope"}`, `{"jsonrpc":"2.0","id":"s","error":{"code":-32601,"message":"Method not found"}}`},
		{`{"jsonrpc":"2.0","id":"absent","method":"get"}`, `{"jsonrpc":"2.0","id":"absent","error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"get","params":[]}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"get","params":null}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"get","params":"x"}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":"watch-absent","method":"watch"}`, `{"jsonrpc":"2.0","id":"watch-absent","error":{"code":-32601,"message":"Method not found"}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"get","params":{"principal":"root"}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"get","params":{"tenant":"t"}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"get","params":{"expiresAt":1}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params"}}`},
		{`{"jsonrpc":"2.0","id":"\u003c\u2028","method":"nope","params":{}}`, "{\"jsonrpc\":\"2.0\",\"id\":\"<\u2028\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}"},
		{`{"jsonrpc":"2.0","id":7,"method":"plan","params":{}}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params","data":{"code":"SCHEMA_VIOLATION"}}}`},
		{`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":"openengine.cluster/v0"}}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"Unsupported protocol version","data":{"code":"UNSUPPORTED_PROTOCOL_VERSION","details":{"requestedProtocolVersion":"openengine.cluster/v0","supportedProtocolVersion":"openengine.cluster/v1"}}}}`},
		{`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":1}}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"Invalid params"}}`},
	}
	eachBinding(t, func(t *testing.T, _ *scriptBackend, w wiretest.Wire) {
		_, ws := w.(*wiretest.WSWire)
		for _, c := range cases {
			if c.in == "" && ws {
				continue // an empty text message is the same parse error; keep NDJSON's empty line
			}
			send(t, w, c.in)
			if got := recv(t, w); got != c.want {
				t.Errorf("in %s\n got %s\nwant %s", c.in, got, c.want)
			}
		}
	})
}

// TestLifecycleMethodsAnswerSchemaViolationOnEmptyParams mirrors the
// portable catalogue: {} for every mutation method is -32602
// SCHEMA_VIOLATION, with details.reason on the lifecycle ones.
func TestLifecycleMethodsAnswerSchemaViolationOnEmptyParams(t *testing.T) {
	w := wiretest.NewPipe(t, newScript(), wiretest.Options{})
	for _, m := range []string{"apply", "update", "stop", "retry", "resubmit", "delete"} {
		send(t, w, `{"jsonrpc":"2.0","id":"`+m+`","method":"`+m+`","params":{}}`)
		got := recv(t, w)
		if !strings.Contains(got, `"code":-32602`) || !strings.Contains(got, `"data":{"code":"SCHEMA_VIOLATION"`) {
			t.Errorf("%s: %s", m, got)
		}
		if m != "apply" && !strings.Contains(got, `"details":{"reason":"missing field`) {
			t.Errorf("%s: want details.reason: %s", m, got)
		}
	}
}

// TestPeerThatStopsReadingIsCutOff: a peer that never reads is cut off by
// the write deadline; its connection ends by itself and cancels go on
// being processed until then (the reader never blocks on the queue).
func TestPeerThatStopsReadingIsCutOff(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{Server: server.Options{WriteTimeout: 10 * time.Millisecond}})
	// The output pipe is never read: the first answer blocks its write.
	send(t, w, getReq(1, ""))
	// Frames still flow into the reader meanwhile, until the deadline cuts
	// the connection off (then writes to it fail).
	for i := 0; i < 300; i++ {
		if w.Send(`{`) != nil {
			break
		}
	}
	testkit.Recv(t, w.Done())
}

// TestLoneSurrogateIDsAreParseErrorsOnEveryBinding: while a request with
// id "\ufffdx" is in flight, frames whose ids are "\ud800x" and "\udbffx"
// (lone surrogate escapes, which a lenient decoder turns into the same
// string) are parse errors with id null — never DUPLICATE_REQUEST_ID, and
// never a second request a cancel could confuse with the first.
func TestLoneSurrogateIDsAreParseErrorsOnEveryBinding(t *testing.T) {
	const parseErr = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	eachBinding(t, func(t *testing.T, b *scriptBackend, w wiretest.Wire) {
		whileGetHeld(t, b, w, "\ufffdx", func() {
			send(t, w, `{"jsonrpc":"2.0","id":"\ud800x","method":"get","params":{}}`)
			expect(t, w, parseErr)
			send(t, w, `{"jsonrpc":"2.0","id":"\udbffx","method":"get","params":{}}`)
			expect(t, w, parseErr)
		})
	})
}
