package postgres

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oecp/oecp/store"
)

// FuzzBroadcastParts feeds any notification payloads to a store, then one
// message of another store split as the sender splits it: no payload
// breaks the listener, each part fits PostgreSQL's 8000-byte payload, and
// the message is handed on whole, once, to its topic's handler.
func FuzzBroadcastParts(f *testing.F) {
	const other = "feedfacefeedface"
	f.Add("live 0123456789abcdef 1 1/1 t hello", "t", "message")
	f.Add("live 0123456789abcdef 7 2/3 t x\nlive 0123456789abcdef 7 1/0 t", "topic9", strings.Repeat("é", 4000))
	f.Add("live x y 1/2 t a\nlive x y 3/2 b\nlive x y 1/-1\nlive a b c\nreleased run:x\n17", "t", "")
	f.Add("live "+other+" 1 1/2 t a", "t", "m")
	f.Fuzz(func(t *testing.T, noise, topic, msg string) {
		if !validTopic(topic) || !utf8.ValidString(msg) || len(msg) > store.MaxBroadcastBytes {
			return // Broadcast refuses to send these
		}
		s := &Store{id: newID()}
		var got []string
		s.OnBroadcast(topic, func(b []byte) { got = append(got, string(b)) })
		for _, p := range strings.Split(noise, "\n") {
			s.notified(p)
		}
		if strings.Contains(noise, other) {
			return // the noise may hold a part of the message below
		}
		got = nil
		for _, p := range parts(other, 1, topic+" "+msg) {
			if len(p) > 8000 {
				t.Fatalf("a part of %d bytes", len(p))
			}
			s.notified(p)
		}
		if len(got) != 1 || got[0] != msg {
			t.Fatalf("handed on %d messages, want the one of %d bytes", len(got), len(msg))
		}
	})
}
