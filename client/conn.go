package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
)

// DefaultSubscriptionBuffer is how many events a subscription holds for a
// consumer that has not read them yet. A consumer that falls further behind
// loses the subscription (ClosedError{Reason: "SLOW_CONSUMER", Local:
// true}) rather than stalling every other call on the connection.
const DefaultSubscriptionBuffer = 1024

// Options tune a connection.
type Options struct {
	// Log receives diagnostics such as unmatched id-null errors (default
	// slog.Default()).
	Log *slog.Logger
	// SubscriptionBuffer overrides DefaultSubscriptionBuffer.
	SubscriptionBuffer int
}

// Conn is one JSON-RPC connection to an OECP server. It is safe for
// concurrent use. One goroutine reads frames; calls write directly under a
// lock.
type Conn struct {
	t    Transport
	log  *slog.Logger
	sbuf int

	wmu sync.Mutex // serialises WriteFrame

	mu      sync.Mutex
	nextID  int64
	pending map[int64]*pending
	subs    map[string]subscriber
	err     error // why the connection ended; set once
	done    chan struct{}

	readerDone chan struct{}
	bg         sync.WaitGroup // background writes (cancels)
	closeOnce  sync.Once
}

// pending is one request waiting for its response.
type pending struct {
	ch chan response // buffered 1
	// establish, for subscription methods, runs on the reader goroutine
	// when the success response arrives, so that the subscription is
	// registered before the next frame (its first event) is read.
	establish func(result json.RawMessage) (subscriber, error)
	// abandoned: the caller gave up (context done) before the response.
	abandoned bool
}

type response struct {
	result json.RawMessage
	err    error
	sub    subscriber
}

// subscriber is a live subscription as the reader sees it. Its methods are
// called with Conn.mu held.
type subscriber interface {
	deliver(params json.RawMessage)
	finish(err error)
}

// New starts a connection over t. The caller must Close it.
func New(t Transport, opts Options) *Conn {
	c := &Conn{
		t:          t,
		log:        opts.Log,
		sbuf:       opts.SubscriptionBuffer,
		pending:    make(map[int64]*pending),
		subs:       make(map[string]subscriber),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.sbuf <= 0 {
		c.sbuf = DefaultSubscriptionBuffer
	}
	go c.readLoop()
	return c
}

// Close ends the connection: pending calls fail with ErrClosed and every
// subscription's channel is closed.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.fail(ErrClosed)
		_ = c.t.Close()
		<-c.readerDone
		c.bg.Wait()
	})
	return nil
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err reports why the connection ended (nil while it is open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail ends the connection once with err.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	for id, p := range c.pending {
		delete(c.pending, id)
		p.ch <- response{err: err}
	}
	for id, s := range c.subs {
		delete(c.subs, id)
		s.finish(err)
	}
}

// inbound is any frame the server sends.
type inbound struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *wireError      `json:"error"`
}

func (c *Conn) readLoop() {
	defer close(c.readerDone)
	for {
		b, err := c.t.ReadFrame()
		if err != nil {
			c.fail(err)
			_ = c.t.Close()
			return
		}
		var f inbound
		if err := json.Unmarshal(b, &f); err != nil {
			c.log.Warn("oecp client: ignoring undecodable frame", "err", err, "frame", truncate(b))
			continue
		}
		if f.Method != "" {
			c.notification(f)
			continue
		}
		c.response(f, b)
	}
}

func truncate(b []byte) string {
	if len(b) > 256 {
		return string(b[:256]) + "…"
	}
	return string(b)
}

func (c *Conn) response(f inbound, raw []byte) {
	id, err := strconv.ParseInt(string(f.ID), 10, 64)
	if err != nil || len(f.ID) == 0 {
		// id null (or not one of ours): an error about a frame the server
		// could not attribute. It matches no request.
		c.log.Warn("oecp client: ignoring response that matches no request", "frame", truncate(raw))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[id]
	if !ok {
		c.log.Debug("oecp client: ignoring late response", "id", id)
		return
	}
	delete(c.pending, id)
	if f.Error != nil {
		p.ch <- response{err: f.Error.toError()}
		return
	}
	if f.Result == nil {
		p.ch <- response{err: fmt.Errorf("oecp client: response %d has neither result nor error", id)}
		return
	}
	r := response{result: f.Result}
	if p.establish != nil {
		sub, err := p.establish(f.Result)
		switch {
		case err != nil:
			r.err = err
		case p.abandoned:
			sub.finish(nil)
			c.cancelSubLocked(sub)
		default:
			// Registered before the next frame is read: the server writes no
			// event of a subscription before its establishment response.
			c.subs[subIDOf(sub)] = sub
			r.sub = sub
		}
	}
	p.ch <- r
}

// subscriptionIDOf reads params.subscriptionId.
func subscriptionIDOf(params json.RawMessage) string {
	var p struct {
		SubscriptionID string `json:"subscriptionId"`
	}
	_ = json.Unmarshal(params, &p)
	return p.SubscriptionID
}

func (c *Conn) notification(f inbound) {
	switch f.Method {
	case "event":
		id := subscriptionIDOf(f.Params)
		c.mu.Lock()
		if s, ok := c.subs[id]; ok {
			s.deliver(f.Params)
		} else {
			c.log.Debug("oecp client: event for no live subscription", "subscriptionId", id)
		}
		c.mu.Unlock()
	case "subscription/closed":
		var p struct {
			SubscriptionID      string `json:"subscriptionId"`
			Reason              string `json:"reason"`
			LastDeliveredCursor string `json:"lastDeliveredCursor"`
		}
		if err := json.Unmarshal(f.Params, &p); err != nil {
			c.log.Warn("oecp client: undecodable subscription/closed", "err", err)
			return
		}
		c.mu.Lock()
		if s, ok := c.subs[p.SubscriptionID]; ok {
			delete(c.subs, p.SubscriptionID)
			s.finish(&ClosedError{SubscriptionID: p.SubscriptionID, Reason: p.Reason, LastDeliveredCursor: p.LastDeliveredCursor})
		}
		c.mu.Unlock()
	default:
		c.log.Warn("oecp client: ignoring unknown notification", "method", f.Method)
	}
}

// request is the JSON-RPC request envelope.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type notificationFrame struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

func (c *Conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.t.WriteFrame(b)
}

// notifyAsync writes a client notification without making anyone wait for
// it (a cancel must not delay the caller that triggered it).
func (c *Conn) notifyAsync(method string, params any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notifyAsyncLocked(method, params)
}

// notifyAsyncLocked is notifyAsync with c.mu held: done is checked and the
// background write registered under the same lock that closes done, so
// Close never waits while a write is being added.
func (c *Conn) notifyAsyncLocked(method string, params any) {
	b, err := json.Marshal(notificationFrame{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return
	}
	if c.err != nil {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		if err := c.write(b); err != nil {
			c.log.Debug("oecp client: notification not sent", "method", method, "err", err)
		}
	}()
}

// cancelSubLocked sends subscription/cancel for sub (c.mu held).
func (c *Conn) cancelSubLocked(sub subscriber) {
	if id, ok := sub.(interface{ subscriptionID() string }); ok {
		c.notifyAsyncLocked("subscription/cancel", map[string]string{"subscriptionId": id.subscriptionID()})
	}
}

// Call sends a request and decodes its result into result (which may be
// nil, or a *json.RawMessage to keep the bytes). A server error is returned
// as *Error. If ctx ends first, Call sends $/cancelRequest for the id and
// returns ctx's error at once; a late answer is dropped.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	r, err := c.roundTrip(ctx, method, params, nil)
	if err != nil {
		return err
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.result, result); err != nil {
		return fmt.Errorf("decode %s result: %w", method, err)
	}
	return nil
}

func (c *Conn) roundTrip(ctx context.Context, method string, params any, establish func(json.RawMessage) (subscriber, error)) (response, error) {
	if params == nil {
		params = struct{}{}
	}
	if err := ctx.Err(); err != nil {
		return response{}, err
	}
	p := &pending{ch: make(chan response, 1), establish: establish}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return response{}, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = p
	c.mu.Unlock()

	b, err := json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err == nil {
		err = c.write(b)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		cerr := c.err
		c.mu.Unlock()
		if cerr != nil {
			return response{}, cerr
		}
		return response{}, fmt.Errorf("send %s: %w", method, err)
	}

	select {
	case r := <-p.ch:
		return r, r.err
	case <-ctx.Done():
	}
	// The caller gave up. Settle under the lock who owns the outcome.
	c.mu.Lock()
	if _, still := c.pending[id]; still {
		if establish == nil {
			delete(c.pending, id)
			c.mu.Unlock()
			c.notifyAsync("$/cancelRequest", map[string]int64{"id": id})
			return response{}, ctx.Err()
		}
		// The server ignores $/cancelRequest for subscription
		// establishment: wait for the answer in the reader and cancel the
		// subscription it brings.
		p.abandoned = true
		c.mu.Unlock()
		return response{}, ctx.Err()
	}
	c.mu.Unlock()
	// The answer raced in: drop it, and a subscription it established.
	r := <-p.ch
	if r.sub != nil {
		c.mu.Lock()
		if c.subs[subIDOf(r.sub)] == r.sub {
			delete(c.subs, subIDOf(r.sub))
			r.sub.finish(nil)
			c.cancelSubLocked(r.sub)
		}
		c.mu.Unlock()
	}
	return response{}, ctx.Err()
}

func subIDOf(s subscriber) string {
	if id, ok := s.(interface{ subscriptionID() string }); ok {
		return id.subscriptionID()
	}
	return ""
}

// errIsConn reports whether err means the connection is gone (as opposed to
// a server error answer or a cancelled context).
func errIsConn(err error) bool {
	var se *Error
	if errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return err != nil
}
