// Package numbered carries short-lived messages between the replicas of
// one store over store.Broadcaster, numbered per stream, so that a
// receiver can tell a message dropped on the way (store.Broadcaster drops
// what it cannot send in time) from one that simply never was.
//
// It is the part the live-output relays of cluster (v1 clusters) and runs
// (native runs) share: the check that a store has other replicas, the
// numbering of each stream's messages on send, the envelope they travel
// in and its decoding on receipt, and how a received number follows the
// one before it. What a gap means, which streams a receiver follows and
// what a message's body holds are each relay's own. It touches nothing
// but the Broadcaster it is given: it keeps no state of the store and
// starts no goroutine.
package numbered

import (
	"encoding/json"
	"errors"
	"sync"

	"github.com/oecp/oecp/store"
)

// Msg is one numbered message: the Seq-th of its Stream (numbers start at
// 1), End when it is the stream's last, and Body the sender's own JSON
// (absent: nil).
type Msg struct {
	Stream string          `json:"s"`
	Seq    uint64          `json:"n"`
	End    bool            `json:"end,omitempty"`
	Body   json.RawMessage `json:"b,omitempty"`
}

// errMalformed is the error of a payload that is not a numbered message.
var errMalformed = errors.New("numbered: malformed message")

// Decode reads one broadcast payload: a JSON object naming a non-empty
// stream and a number of at least 1.
func Decode(payload []byte) (Msg, error) {
	var m Msg
	if err := json.Unmarshal(payload, &m); err != nil {
		return Msg{}, errors.Join(errMalformed, err)
	}
	if m.Stream == "" || m.Seq == 0 {
		return Msg{}, errMalformed
	}
	return m, nil
}

// Channel is one topic's numbered messages between the replicas of a
// store. A nil *Channel (a store without other replicas) sends nothing.
type Channel struct {
	bc    store.Broadcaster
	topic string

	mu   sync.Mutex
	sent map[string]uint64 // last number sent, by stream
}

// Open returns the channel of topic on st and hands it every decoded
// message of the other replicas, in their order (recv must not block; a
// malformed payload is passed over). It returns nil when st has no other
// replicas: it is not a store.Broadcaster, or store.IsShared is false.
func Open(st store.Store, topic string, recv func(Msg)) *Channel {
	bc, ok := st.(store.Broadcaster)
	if !ok || !store.IsShared(st) {
		return nil
	}
	c := &Channel{bc: bc, topic: topic, sent: map[string]uint64{}}
	bc.OnBroadcast(topic, func(payload []byte) {
		if m, err := Decode(payload); err == nil {
			recv(m)
		}
	})
	return c
}

// Send broadcasts body (JSON, or nil) as the next message of stream; end
// makes it the stream's last, after which the stream's numbers start
// again at 1. A message that cannot be encoded or sent still uses its
// number, so that its receivers see the gap.
func (c *Channel) Send(stream string, body []byte, end bool) {
	if c == nil {
		return
	}
	// Numbered and queued under one lock: the order of the numbers is the
	// order of the queue (Broadcast does not wait).
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.sent[stream] + 1
	if end {
		delete(c.sent, stream)
	} else {
		c.sent[stream] = n
	}
	payload, err := json.Marshal(Msg{Stream: stream, Seq: n, End: end, Body: body})
	if err == nil {
		c.bc.Broadcast(c.topic, payload)
	}
}

// Order is how a received number follows the one received before it on
// its stream.
type Order int

const (
	First Order = iota // the first number received on the stream
	Next               // the one after the last
	Gap                // past the one after the last: messages were lost
	Back               // the last again or before it: a duplicate, a reordered message or a sender that started the stream again
)

// Broken reports whether the stream did not follow on: a receiver cannot
// tell what it missed.
func (o Order) Broken() bool { return o == Gap || o == Back }

// Last is the receiving side of one stream: the number received last. Its
// zero value has received nothing. It is not safe for concurrent use.
type Last struct {
	n uint64
}

// Take records seq as received and reports how it follows the number
// before it. Whatever it was, seq is the one the next is measured from:
// a sender that starts its stream again costs one break, not every
// message after it.
func (l *Last) Take(seq uint64) Order {
	prev := l.n
	l.n = seq
	switch {
	case prev == 0:
		return First
	case seq == prev+1:
		return Next
	case seq > prev+1:
		return Gap
	default:
		return Back
	}
}
