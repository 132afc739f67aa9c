package worker_test

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
)

// byteAtATime yields its data one byte per Read, as a program making tiny
// writes does, and closes reached once target bytes were read.
type byteAtATime struct {
	data    []byte
	read    atomic.Int64
	target  int64
	reached chan struct{}
	once    sync.Once
}

func (b *byteAtATime) Read(p []byte) (int, error) {
	i := b.read.Load()
	if i >= int64(len(b.data)) {
		return 0, io.EOF
	}
	p[0] = b.data[i]
	if b.read.Add(1) >= b.target {
		b.once.Do(func() { close(b.reached) })
	}
	return 1, nil
}

// gatedWriter blocks its first Write until open is closed, then keeps
// everything it is given.
type gatedWriter struct {
	open  chan struct{}
	first sync.Once
	got   bytes.Buffer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.first.Do(func() { <-g.open })
	return g.got.Write(p)
}

// TestReadAheadIsBoundedInBytesNotWrites: a program's output arrives one
// byte per read while the line handler is stuck on its first chunk. The
// read-ahead must keep taking output until it holds its byte budget, not
// stall after a number of reads, so the program never blocks on a full
// pipe within the bound; it never holds more than the budget; and once
// the handler moves on, every byte arrives in order.
func TestReadAheadIsBoundedInBytesNotWrites(t *testing.T) {
	const budget = 8 << 10
	var data []byte
	for i := range 8000 {
		data = fmt.Appendf(data, "line %06d\n", i)
	}
	src := &byteAtATime{data: data, target: budget, reached: make(chan struct{})}
	dst := &gatedWriter{open: make(chan struct{})}
	peak := make(chan int64, 1)
	go func() { peak <- worker.CopyReadAhead(dst, src, int64(len(data)), budget) }()

	select {
	case <-src.reached:
	case <-time.After(30 * time.Second):
		n := src.read.Load()
		close(dst.open)
		testkit.Recv(t, peak)
		t.Fatalf("the read-ahead stalled at %d bytes read, within its budget of %d", n, budget)
	}
	close(dst.open)
	if p := testkit.Recv(t, peak); p > budget {
		t.Errorf("the read-ahead held %d bytes, over its budget of %d", p, budget)
	}
	if !bytes.Equal(dst.got.Bytes(), data) {
		t.Fatalf("output differs: got %d bytes, want %d", dst.got.Len(), len(data))
	}
}
