package live

import (
	"context"
	"sync"
	"time"

	"github.com/oecp/oecp/internal/numbered"
	"github.com/oecp/oecp/store"
)

// Live output across replicas. Every attach event of an execution running
// here is also broadcast, numbered per execution (its key is the stream);
// a replica where a client attaches to an execution running elsewhere
// keeps a window for it like a local one, fed by those messages. A gap in
// the numbers (a message dropped on the way) closes its subscribers with
// SLOW_CONSUMER, as a subscriber that fell behind the window is; the
// window ends with the sender's end message or, when the sender died and
// the store shows the execution ended, remoteEndGrace after that.

// remoteEndGrace is how long a window of an execution the store shows
// ended waits for its sender's end message (the output sent just before
// the settlement) before it ends anyway.
const remoteEndGrace = 2 * time.Second

// relayTopic is the broadcast topic of native runs' attach events.
const relayTopic = "runattach"

// Relay is a replica's side of live output across replicas. It is safe
// for concurrent use.
type Relay struct {
	st store.Store
	ch *numbered.Channel // nil: this store has no other replicas

	mu     sync.Mutex
	remote map[string]*remoteExec // windows of executions running elsewhere
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// remoteExec is the window of an execution running on another replica.
type remoteExec struct {
	e    *Window
	last numbered.Last
}

// NewRelay starts the relay of st's broadcasts, when it has them; Stop
// ends it.
func NewRelay(st store.Store) *Relay {
	r := &Relay{st: st, remote: map[string]*remoteExec{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.ch = numbered.Open(st, relayTopic, r.received)
	return r
}

// Send broadcasts one attach event of an execution running here (ev:
// encoded by OutputEvent); end is its last. A dropped
// message is a gap its receivers see.
func (r *Relay) Send(key string, ev []byte, end bool) {
	r.ch.Send(key, ev, end)
}

// received feeds another replica's message to the window of its
// execution, if a client here follows it.
func (r *Relay) received(m numbered.Msg) {
	r.mu.Lock()
	x := r.remote[m.Stream]
	if x == nil {
		r.mu.Unlock()
		return
	}
	broken := x.last.Take(m.Seq).Broken()
	if m.End {
		delete(r.remote, m.Stream)
	}
	r.mu.Unlock()
	switch {
	case broken:
		x.e.lose()
		if m.End {
			x.e.push(settledEvent, true)
		}
	case m.End:
		x.e.push(settledEvent, true)
	case m.Body != nil:
		x.e.push(m.Body, false)
	}
}

// Follow returns the window of an execution running on another replica,
// opening it (and its watch of the store for the execution's end) when
// no client here followed it yet; ended reads whether the store shows the
// execution ended. It returns nil without other replicas, and once the
// relay is stopped.
func (r *Relay) Follow(key string, ended func(ctx context.Context) bool) *Window {
	if r.ch == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return nil // stopped: no watch may start after Stop's Wait
	}
	if x := r.remote[key]; x != nil {
		return x.e
	}
	x := &remoteExec{e: newWindow()}
	r.remote[key] = x
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.watchEnd(key, x, ended)
	}()
	return x.e
}

// watchEnd ends a remote window once the store shows its execution
// ended and the sender's end message did not come within remoteEndGrace.
func (r *Relay) watchEnd(key string, x *remoteExec, ended func(ctx context.Context) bool) {
	for {
		ch := r.st.Changed()
		if ended(r.ctx) {
			break
		}
		select {
		case <-ch:
		case <-r.ctx.Done():
			return
		}
	}
	t := time.NewTimer(remoteEndGrace)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
		return
	}
	r.mu.Lock()
	current := r.remote[key] == x
	if current {
		delete(r.remote, key)
	}
	r.mu.Unlock()
	if current {
		x.e.push(settledEvent, true)
	}
}

// Stop ends the watches of remote windows; Follow starts none after it.
func (r *Relay) Stop() {
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	r.wg.Wait()
}
