package postgres

import (
	"strconv"
	"testing"
)

// joinerStore is a store that records the broadcasts it is handed.
func joinerStore() (*Store, *[]string) {
	s := &Store{}
	var got []string
	s.OnBroadcast("t", func(p []byte) { got = append(got, string(p)) })
	return s, &got
}

// The parts of broadcast messages are joined per sender, senders
// interleaved; a sender's next message ends the one it left half sent
// (its rest can no longer come), and no more than maxJoining messages
// are held half received however many senders leave one.
func TestBroadcastHalfReceivedMessagesAreBounded(t *testing.T) {
	t.Run("interleaved senders", func(t *testing.T) {
		s, got := joinerStore()
		for _, p := range []string{"a 1 1/2 t he", "b 7 1/2 t wo", "a 1 2/2 llo", "b 7 2/2 rld"} {
			s.received(p)
		}
		if len(*got) != 2 || (*got)[0] != "hello" || (*got)[1] != "world" || HalfReceived(s) != 0 {
			t.Fatalf("got %q, %d half received", *got, HalfReceived(s))
		}
	})
	t.Run("a sender's next message", func(t *testing.T) {
		s, got := joinerStore()
		s.received("a 1 1/3 t lost ")
		s.received("a 2 1/1 t next")
		if len(*got) != 1 || (*got)[0] != "next" || HalfReceived(s) != 0 {
			t.Fatalf("got %q, %d half received", *got, HalfReceived(s))
		}
		s.received("a 1 2/3 rest")
		if len(*got) != 1 || HalfReceived(s) != 0 {
			t.Fatalf("the rest of a dropped message: got %q, %d half received", *got, HalfReceived(s))
		}
	})
	t.Run("many senders", func(t *testing.T) {
		s, got := joinerStore()
		const senders = 3 * maxJoining
		for i := range senders {
			s.received("s" + strconv.Itoa(i) + " 1 1/2 t m" + strconv.Itoa(i))
		}
		if n := HalfReceived(s); n > maxJoining {
			t.Fatalf("%d messages half received, over %d", n, maxJoining)
		}
		s.received("s0 1 2/2 !")                               // started first: dropped
		s.received("s" + strconv.Itoa(senders-1) + " 1 2/2 !") // the latest
		if want := "m" + strconv.Itoa(senders-1) + "!"; len(*got) != 1 || (*got)[0] != want {
			t.Fatalf("got %q, want only %q", *got, want)
		}
	})
}

// A lost listener connection drops every message half received.
func TestForgetPartsDropsHalfReceived(t *testing.T) {
	s, got := joinerStore()
	s.received("a 1 1/2 t he")
	s.forgetParts()
	s.received("a 1 2/2 llo")
	if len(*got) != 0 || HalfReceived(s) != 0 {
		t.Fatalf("got %q, %d half received", *got, HalfReceived(s))
	}
}
