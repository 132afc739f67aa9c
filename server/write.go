package server

import "context"

// The write side of a connection. Any goroutine that produces a frame may
// take the write role (outbox.tryDirect) and call the transport's
// WriteFrame and Flush (the reader only WriteFrameHeld and FlushNoWait);
// the role is exclusive, so those calls never overlap. No lock of this
// package is held across a call that may wait on the peer; hmu is held
// across the reader's calls, which never wait.

// answer delivers the final frame of a task and frees its slot before the
// peer can see the frame (so a client that keeps at most 256 requests
// outstanding never meets SERVER_BUSY): written in place by the write-role
// holder, or queued once a queue token is held — the slot bounds the
// goroutines waiting for room, so it is given up only then.
func (c *Conn) answer(frame []byte) {
	if c.out.tryDirect() {
		c.freeSlot()
		c.writeDirect(frame)
		return
	}
	start, freed, _ := c.out.pushThen(c.ctx, frame, c.freeSlot)
	if !freed {
		c.freeSlot()
	}
	if start {
		go c.drainer(false)
	}
}

// send delivers a frame from a request or subscription goroutine: written
// in place when the connection is idle, else queued (waiting for room
// while ctx lives).
func (c *Conn) send(ctx context.Context, b []byte) error {
	if c.out.tryDirect() {
		c.writeDirect(b)
		return nil
	}
	start, err := c.out.push(ctx, b)
	if start {
		go c.drainer(false)
	}
	return err
}

// writeDirect writes frames while holding the write role, flushing once
// per batchFlushBytes and at the end, then hands the role to a drainer if
// frames were queued meanwhile.
func (c *Conn) writeDirect(frames ...[]byte) {
	c.beginWrite()
	var err error
	pending := 0
	for _, f := range frames {
		if err != nil || c.out.isAborted() {
			break
		}
		if pending >= batchFlushBytes {
			err, pending = c.t.Flush(), 0
			c.endWrite()
			c.beginWrite()
		}
		if err == nil {
			err = c.t.WriteFrame(f)
			pending += len(f)
			c.countOut()
		}
	}
	if err == nil {
		err = c.t.Flush()
	}
	c.endWrite()
	if err != nil {
		c.writeFailed(err)
	}
	if c.out.release() {
		go c.drainer(false)
	}
}

// writeHeld writes a frame of the reader's in place, through a transport
// that never waits on the peer, when the reader holds the write role or
// can take it; it reports false when the frame must be queued instead. The
// frame stays buffered, and the reader keeps the role, until flushHeld runs
// before the reader next waits for input: the answers to frames that
// arrived together go out in one write, and while the role is held other
// producers queue behind them in order.
func (c *Conn) writeHeld(b []byte) bool {
	if c.nw == nil {
		return false
	}
	c.hmu.Lock()
	if !c.held && !c.out.tryDirect() {
		c.hmu.Unlock()
		return false
	}
	c.held = true
	err := c.nw.WriteFrameHeld(b)
	c.countOut()
	if err != nil {
		c.held = false
	}
	c.hmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	}
	return true
}

// flushHeld pushes what the reader holds as far as the peer takes it at
// once and gives up the write role: to a drainer that flushes the rest
// (and may wait) when the peer did not take it all, or to one that writes
// what was queued meanwhile. It never waits on the peer, and it runs where
// the transport is about to read (on the reader, or on a goroutine closing
// the connection), so a broken write is handled on a goroutine of its own.
func (c *Conn) flushHeld() {
	c.hmu.Lock()
	if !c.held {
		c.hmu.Unlock()
		return
	}
	c.held = false
	owed, err := c.nw.FlushNoWait()
	c.hmu.Unlock()
	switch {
	case err != nil:
		go c.writeFailed(err)
	case owed:
		go c.drainer(true)
	case c.out.release():
		go c.drainer(false)
	}
}

// drainer holds the write role and writes queued frames in order,
// flushing once per batch, until the queue is empty; it exists only while
// there is something to drain or bytes are owed (flushed first).
func (c *Conn) drainer(owed bool) {
	if owed {
		c.beginWrite()
		err := c.t.Flush()
		c.endWrite()
		if err != nil {
			c.writeFailed(err)
		}
	}
	var batch []outFrame
	for {
		var ok bool
		batch, ok = c.out.next(batch[:0])
		if !ok {
			return
		}
		c.beginWrite()
		var err error
		for _, f := range batch {
			if err == nil && !c.out.isAborted() {
				err = c.t.WriteFrame(f.b)
				c.countOut()
			}
			if f.token {
				c.out.releaseToken()
			}
		}
		if err == nil {
			err = c.t.Flush()
		}
		c.endWrite()
		if err != nil {
			c.writeFailed(err)
		}
	}
}

// writeFailed ends a connection whose transport broke.
func (c *Conn) writeFailed(err error) {
	c.opts.Log.Debug("write failed", "err", err)
	c.cutOff(CloseInternal)
}
