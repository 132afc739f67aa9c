package runs

import (
	"context"
	"sync"
	"time"

	"github.com/oecp/oecp/internal/numbered"
	"github.com/oecp/oecp/store"
)

// Live output across replicas. On a store shared by several replicas
// (store.Broadcaster), every attach event of an execution running here is
// also broadcast, numbered per execution; a replica where a client
// attaches to an execution running elsewhere keeps a window for it like a
// local one, fed by those messages. A gap in the numbers (a message
// dropped on the way) closes its subscribers with SLOW_CONSUMER, as a
// subscriber that fell behind the window is; the window ends with the
// sender's end message or, when the sender died and the store shows the
// execution ended, remoteEndGrace after that.

// remoteEndGrace is how long a window of an execution the store shows
// ended waits for its sender's end message (the output sent just before
// the settlement) before it ends anyway.
const remoteEndGrace = 2 * time.Second

// relayTopic is the broadcast topic of native runs' attach events.
const relayTopic = "runattach"

// relay is the backend's side of live output across replicas: each
// execution's attach events are a numbered stream (its key) of the
// channel.
type relay struct {
	ch *numbered.Channel // nil: this store has no other replicas

	mu     sync.Mutex
	remote map[string]*remoteExec // windows of executions running elsewhere
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// remoteExec is the window of an execution running on another replica.
type remoteExec struct {
	e    *liveExec
	last numbered.Last
}

// newRelay starts the relay of st's broadcasts, when it has them.
func newRelay(st store.Store) *relay {
	r := &relay{remote: map[string]*remoteExec{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.ch = numbered.Open(st, relayTopic, r.received)
	return r
}

// send broadcasts one attach event of a local execution; end is its last.
// A dropped message is a gap its receivers see.
func (r *relay) send(key string, ev []byte, end bool) {
	r.ch.Send(key, ev, end)
}

// received feeds another replica's message to the window of its
// execution, if a client here follows it.
func (r *relay) received(m numbered.Msg) {
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

// follow returns the window of an execution running on another replica,
// opening it (and its watch of the store for the execution's end) when
// no client here followed it yet; ended reads whether the store shows the
// execution ended. It returns nil without other replicas.
func (r *relay) follow(st store.Store, key string, ended func(ctx context.Context) bool) *liveExec {
	if r.ch == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if x := r.remote[key]; x != nil {
		return x.e
	}
	x := &remoteExec{e: &liveExec{wake: make(chan struct{})}}
	r.remote[key] = x
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.watchEnd(st, key, x, ended)
	}()
	return x.e
}

// watchEnd ends a remote window once the store shows its execution
// ended and the sender's end message did not come within remoteEndGrace.
func (r *relay) watchEnd(st store.Store, key string, x *remoteExec, ended func(ctx context.Context) bool) {
	for {
		ch := st.Changed()
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

// stop ends the watches of remote windows.
func (r *relay) stop() {
	r.cancel()
	r.wg.Wait()
}
