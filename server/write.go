package server

import "context"

// The write side of a connection. Any goroutine that produces a frame may
// take the write role (outbox.tryDirect) and call the transport's
// WriteFrame and Flush (the reader only WriteFrameNoWait); the role is
// exclusive, so those calls never overlap, and no lock of this package is
// held across them.

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

// writeDirect writes one frame while holding the write role, then hands
// the role to a drainer if frames were queued meanwhile.
func (c *Conn) writeDirect(b []byte) {
	c.beginWrite()
	err := c.t.WriteFrame(b)
	if err == nil {
		err = c.t.Flush()
	}
	c.countOut()
	c.endWrite()
	if err != nil {
		c.writeFailed(err)
	}
	if c.out.release() {
		go c.drainer(false)
	}
}

// writeNoWait writes a frame of the reader's while it holds the write
// role, through a transport that never waits on the peer. What the peer
// did not take at once is owed: the role then passes to a drainer, which
// flushes it (and may wait) before anything queued.
func (c *Conn) writeNoWait(b []byte) {
	owed, err := c.nw.WriteFrameNoWait(b)
	if err != nil {
		c.writeFailed(err)
	} else if owed {
		go c.drainer(true)
		return
	}
	if c.out.release() {
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
