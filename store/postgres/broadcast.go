package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/oecp/oecp/store"
)

// Broadcasts ride on the store's NOTIFY channel, which every store on the
// schema already listens to. A message is sent as one or more
// notifications (a payload is at most 8000 bytes), each
// "live <store id> <message number> <part>/<parts> <text>", by one sender
// goroutine per store, in order: several parts, and several queued
// messages, go in one transaction, whose notifications PostgreSQL
// delivers together and in order. The listener joins the parts of a
// message and hands it on. Since a sender's parts come in order and
// together, a sender has at most one message half received: its next
// message, or the listener's lost connection, ends it (the rest is lost),
// and at most maxJoining senders' messages are joined at once.

var _ store.Broadcaster = (*Store)(nil)

const (
	// livePrefix starts a broadcast notification's payload.
	livePrefix = "live "
	// maxPartBytes bounds one part's text, under PostgreSQL's 8000-byte
	// payload limit with room for the header.
	maxPartBytes = 7000
	// broadcastQueue bounds the messages waiting to be sent; a message
	// past it is dropped.
	broadcastQueue = 1024
	// maxBatch bounds the messages sent in one transaction.
	maxBatch = 64
	// maxJoining bounds the messages whose parts are being joined, one per
	// sender; past it the one that started first is dropped.
	maxJoining = 64
	// qNotify sends one notification.
	qNotify = `SELECT pg_notify(convert_from($1, 'UTF8'), convert_from($2, 'UTF8'))`
)

// broadcaster is the store's sending and receiving side of broadcasts.
type broadcaster struct {
	once  sync.Once
	queue chan []byte
	done  chan struct{}
	next  uint64 // message number, on the sender goroutine
	// ctx ends when the store closes: what is still queued is dropped
	// rather than sent to a database that may be gone.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	handlers map[string]func([]byte) // by topic
	parts    map[string]*joining     // sender store id → its message half received
	started  uint64                  // messages started, numbering joining.order
}

// joining is a message of one sender whose parts are being received.
type joining struct {
	n     string // its message number
	parts []string
	order uint64 // when it started, among all senders' messages
}

// Broadcast implements store.Broadcaster: the message is the topic, a
// space and the payload.
func (s *Store) Broadcast(topic string, payload []byte) bool {
	if len(payload) > store.MaxBroadcastBytes || !utf8.Valid(payload) || !validTopic(topic) {
		return false
	}
	payload = append([]byte(topic+" "), payload...)
	s.bc.once.Do(func() {
		s.bc.queue, s.bc.done = make(chan []byte, broadcastQueue), make(chan struct{})
		s.bc.ctx, s.bc.cancel = context.WithCancel(context.Background())
		go s.sendLoop()
	})
	if s.gate.Enter() != nil {
		return false
	}
	defer s.gate.Exit()
	select {
	case s.bc.queue <- payload:
		return true
	default:
		return false
	}
}

// OnBroadcast implements store.Broadcaster.
func (s *Store) OnBroadcast(topic string, fn func([]byte)) {
	s.bc.mu.Lock()
	defer s.bc.mu.Unlock()
	if s.bc.handlers == nil {
		s.bc.handlers = map[string]func([]byte){}
	}
	s.bc.handlers[topic] = fn
}

// validTopic reports whether topic is a word of letters and digits.
func validTopic(topic string) bool {
	for _, r := range topic {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return topic != ""
}

// sendLoop sends the queued messages until the store closes.
func (s *Store) sendLoop() {
	defer close(s.bc.done)
	for first := range s.bc.queue {
		batch := [][]byte{first}
		for len(batch) < maxBatch && len(s.bc.queue) > 0 {
			batch = append(batch, <-s.bc.queue)
		}
		if s.bc.ctx.Err() != nil {
			continue // closing: dropped
		}
		var payloads []string
		for _, m := range batch {
			s.bc.next++
			payloads = append(payloads, parts(s.id, s.bc.next, string(m))...)
		}
		if err := s.notifyAll(payloads); err != nil {
			s.log.Debug("store/postgres: broadcast dropped", "messages", len(batch), "err", err)
		}
	}
}

// notifyAll sends the payloads in one transaction, one round trip, whose
// commit does not wait for the log's flush: a broadcast is for the
// listeners of the moment, and a crash loses it whether or not it was
// flushed.
func (s *Store) notifyAll(payloads []string) error {
	ctx, cancel := context.WithTimeout(s.bc.ctx, s.txTimeout)
	defer cancel()
	qs := []query{{sql: "BEGIN"}, {sql: asyncCommit}}
	for _, p := range payloads {
		qs = append(qs, query{sql: qNotify, args: []any{s.channel, p}, scan: func(pgx.Rows) error { return nil }})
	}
	return s.exchangeAlone(ctx, append(qs, query{sql: "COMMIT"}))
}

// stopBroadcasts stops the sender, dropping what is still queued.
func (s *Store) stopBroadcasts() {
	s.bc.once.Do(func() {}) // no sender starts after this
	if s.bc.queue != nil {
		s.bc.cancel()
		close(s.bc.queue)
		<-s.bc.done
	}
}

// parts splits message n of store id into notification payloads, never
// inside a UTF-8 sequence.
func parts(id string, n uint64, text string) []string {
	var chunks []string
	for len(text) > maxPartBytes {
		cut := maxPartBytes
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		if cut == 0 { // no rune starts in the part (Broadcast refuses such text): cut anywhere
			cut = maxPartBytes
		}
		chunks = append(chunks, text[:cut])
		text = text[cut:]
	}
	chunks = append(chunks, text)
	out := make([]string, len(chunks))
	head := livePrefix + id + " " + strconv.FormatUint(n, 10) + " "
	for i, c := range chunks {
		out[i] = head + strconv.Itoa(i+1) + "/" + strconv.Itoa(len(chunks)) + " " + c
	}
	return out
}

// received handles a broadcast notification of another store: the last
// part of a message hands the joined message on.
func (s *Store) received(payload string) {
	f := strings.SplitN(payload, " ", 4)
	if len(f) != 4 {
		return
	}
	sender, num := f[0], f[1]
	i, n, ok := partOf(f[2])
	if !ok {
		return
	}
	s.bc.mu.Lock()
	got, whole := s.bc.join(sender, num, i, n, f[3])
	if !whole {
		s.bc.mu.Unlock()
		return
	}
	topic, msg, _ := strings.Cut(strings.Join(got, ""), " ")
	fn := s.bc.handlers[topic]
	s.bc.mu.Unlock()
	// Only the listener's goroutine calls received, so messages are
	// handed on in order without the lock.
	if fn != nil {
		fn([]byte(msg))
	}
}

// join adds part i of n of a sender's message num and returns the parts
// once the message is whole. A part that does not follow the sender's
// last one ends the sender's message half received. The caller holds mu.
func (bc *broadcaster) join(sender, num string, i, n int, text string) ([]string, bool) {
	cur := bc.parts[sender]
	if cur != nil && (cur.n != num || len(cur.parts) != i-1) {
		delete(bc.parts, sender) // a part is missing: the message is lost
		cur = nil
	}
	if cur == nil {
		if i != 1 {
			return nil, false
		}
		if i == n {
			return []string{text}, true
		}
		bc.started++
		cur = &joining{n: num, order: bc.started}
		if bc.parts == nil {
			bc.parts = map[string]*joining{}
		}
		bc.evictJoining()
		bc.parts[sender] = cur
	}
	cur.parts = append(cur.parts, text)
	if i < n {
		return nil, false
	}
	delete(bc.parts, sender)
	return cur.parts, true
}

// evictJoining drops the message that started first while maxJoining are
// being joined. The caller holds mu.
func (bc *broadcaster) evictJoining() {
	if len(bc.parts) < maxJoining {
		return
	}
	oldest := ""
	for sender, j := range bc.parts {
		if oldest == "" || j.order < bc.parts[oldest].order {
			oldest = sender
		}
	}
	delete(bc.parts, oldest)
}

// forgetParts drops every message half received: the listener's
// connection was lost, and the rest of them with it.
func (s *Store) forgetParts() {
	s.bc.mu.Lock()
	s.bc.parts = nil
	s.bc.mu.Unlock()
}

// partOf parses "i/n".
func partOf(s string) (int, int, bool) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	return i, n, ok && err1 == nil && err2 == nil && i >= 1 && i <= n
}
