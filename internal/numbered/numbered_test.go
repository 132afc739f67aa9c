package numbered_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/oecp/oecp/internal/numbered"
	"github.com/oecp/oecp/store"
)

// bus is a store.Broadcaster of one process whose messages a test reads
// back, and which hands a test's payloads to the process's receiver.
type bus struct {
	store.Store // nil: only the Broadcaster and Shared methods are called
	shared      bool
	sent        [][]byte
	recv        map[string]func([]byte)
}

func newBus(shared bool) *bus { return &bus{shared: shared, recv: map[string]func([]byte){}} }

func (b *bus) SharedByReplicas() bool { return b.shared }

func (b *bus) Broadcast(topic string, payload []byte) bool {
	b.sent = append(b.sent, append([]byte(topic+" "), payload...))
	return true
}

func (b *bus) OnBroadcast(topic string, fn func([]byte)) { b.recv[topic] = fn }

// unshared is a store without the Broadcaster methods.
type unshared struct{ store.Store }

func TestOpenWithoutOtherReplicas(t *testing.T) {
	recv := func(numbered.Msg) { t.Fatal("received") }
	if c := numbered.Open(unshared{}, "t", recv); c != nil {
		t.Fatal("a store without Broadcaster has a channel")
	}
	b := newBus(false)
	c := numbered.Open(b, "t", recv)
	if c != nil || len(b.recv) != 0 {
		t.Fatal("a store not shared by replicas has a channel")
	}
	c.Send("s", nil, false) // a nil channel sends nothing
}

func TestSendNumbersEachStream(t *testing.T) {
	b := newBus(true)
	c := numbered.Open(b, "topic", func(numbered.Msg) {})
	c.Send("a", []byte(`{"x":1}`), false)
	c.Send("b", nil, false)
	c.Send("a", []byte(`"two"`), false)
	c.Send("a", nil, true)
	c.Send("a", []byte(`3`), false)
	c.Send("b", []byte(`not json`), false) // its number is used all the same
	c.Send("b", nil, false)
	want := []string{
		`topic {"s":"a","n":1,"b":{"x":1}}`,
		`topic {"s":"b","n":1}`,
		`topic {"s":"a","n":2,"b":"two"}`,
		`topic {"s":"a","n":3,"end":true}`,
		`topic {"s":"a","n":1,"b":3}`,
		`topic {"s":"b","n":3}`,
	}
	if len(b.sent) != len(want) {
		t.Fatalf("sent %q", b.sent)
	}
	for i, w := range want {
		if string(b.sent[i]) != w {
			t.Fatalf("message %d is %s, want %s", i, b.sent[i], w)
		}
	}
}

func TestReceivePassesOverMalformed(t *testing.T) {
	b := newBus(true)
	var got []numbered.Msg
	numbered.Open(b, "topic", func(m numbered.Msg) { got = append(got, m) })
	for _, p := range []string{
		`{"s":"a","n":1,"b":{"k":"v"}}`,
		`not json`,
		`{"s":"","n":2}`,
		`{"s":"a","n":0}`,
		`{"s":"a"}`,
		`{"s":7,"n":2}`,
		`{"s":"a","n":-1}`,
		`null`,
		`{"s":"a","n":2,"end":true}`,
	} {
		b.recv["topic"]([]byte(p))
	}
	if len(got) != 2 || got[0].Seq != 1 || string(got[0].Body) != `{"k":"v"}` || !got[1].End || got[1].Body != nil {
		t.Fatalf("received %+v", got)
	}
}

func TestLastTellsHowANumberFollows(t *testing.T) {
	var l numbered.Last
	steps := []struct {
		seq  uint64
		want numbered.Order
	}{
		{5, numbered.First}, // a receiver may join a stream anywhere
		{6, numbered.Next},
		{8, numbered.Gap},  // 7 was lost
		{8, numbered.Back}, // a duplicate
		{9, numbered.Next},
		{7, numbered.Back}, // reordered
		{8, numbered.Next}, // measured from the one received last
		{1, numbered.Back}, // the sender started the stream again
		{2, numbered.Next},
	}
	for i, s := range steps {
		if got := l.Take(s.seq); got != s.want {
			t.Fatalf("step %d: Take(%d) = %d, want %d", i, s.seq, got, s.want)
		}
		if s.want.Broken() != (s.want == numbered.Gap || s.want == numbered.Back) {
			t.Fatalf("step %d: Broken is %v", i, s.want.Broken())
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"s":"a","n":1}`,
		`{"s":"t\u0000r/x","n":18446744073709551615,"end":true}`,
		`{"s":"a","n":2,"b":{"type":"output","text":"hi"}}`,
		`{"s":"a","n":0}`,
		`{"n":1}`,
		`[1]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := numbered.Decode(payload)
		if err != nil {
			return
		}
		if m.Stream == "" || m.Seq == 0 || (m.Body != nil && !json.Valid(m.Body)) {
			t.Fatalf("decoded %+v", m)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := numbered.Decode(again)
		if err != nil || m2.Stream != m.Stream || m2.Seq != m.Seq || m2.End != m.End || !bytes.Equal(compact(t, m2.Body), compact(t, m.Body)) {
			t.Fatalf("%+v does not decode again from %s: %+v %v", m, again, m2, err)
		}
	})
}

// compact is raw JSON without its insignificant space (nil stays nil).
func compact(t *testing.T, raw json.RawMessage) []byte {
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
