package server

import (
	"sync"
	"time"
)

// watchdogTick is how often the write watchdog looks at writes in progress;
// a stalled write is cut off between WriteTimeout and WriteTimeout plus one
// tick after it started.
const watchdogTick = time.Second

// writeWatch enforces the write deadline of every connection with one
// goroutine for the whole process, instead of arming a timer around each
// write (resetting a runtime timer wakes another thread, which cost more
// than the write itself on small frames). The goroutine runs only while
// some connection is open.
type writeWatch struct {
	mu    sync.Mutex
	conns map[*Conn]struct{}
	stop  chan struct{} // non-nil while the loop runs; closed to end it
}

var watchdog writeWatch

// add registers c for the lifetime of its Serve.
func (w *writeWatch) add(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conns == nil {
		w.conns = map[*Conn]struct{}{}
	}
	w.conns[c] = struct{}{}
	if w.stop == nil {
		w.stop = make(chan struct{})
		go w.loop(w.stop)
	}
}

// remove unregisters c; the last one out stops the loop.
func (w *writeWatch) remove(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.conns, c)
	if len(w.conns) == 0 && w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
}

func (w *writeWatch) loop(stop chan struct{}) {
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.check(now)
		}
	}
}

// check cuts off every connection whose write in progress started more
// than its WriteTimeout before now. Each is cut off on its own goroutine:
// closing a transport may wait (a WebSocket close handshake, a stdio
// close), and no connection's cut-off waits for another's.
func (w *writeWatch) check(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		start := c.writeStart.Load()
		if start != 0 && now.Sub(time.Unix(0, start)) > c.opts.WriteTimeout && c.stallOnce.CompareAndSwap(false, true) {
			go c.stalled()
		}
	}
}

// beginWrite and endWrite bracket every write to the transport.
func (c *Conn) beginWrite() { c.writeStart.Store(time.Now().UnixNano()) }
func (c *Conn) endWrite()   { c.writeStart.Store(0) }

// stalled cuts off a peer whose write did not finish in time.
func (c *Conn) stalled() {
	c.opts.Log.Warn("write deadline passed; closing connection")
	c.cutOff(CloseStalled)
}
