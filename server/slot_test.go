package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/internal/wiretest"
)

// TestAtMost256OutstandingNeverMeetsServerBusy pins that a task frees its
// slot before the peer can see its answer: a client that sends a new
// request only after an answer arrives, with at most 256 outstanding, is
// never refused. (Before the fix a few in 20,000 were.)
func TestAtMost256OutstandingNeverMeetsServerBusy(t *testing.T) {
	b := newScript()
	w := wiretest.NewPipe(t, b, wiretest.Options{})
	const n = 20000
	window := make(chan struct{}, 256)
	busy := 0
	read := make(chan struct{})
	go func() {
		defer close(read)
		for i := 0; i < n; i++ {
			l, err := w.Recv()
			if err != nil {
				return
			}
			if strings.Contains(l, "SERVER_BUSY") {
				busy++
			}
			<-window
		}
	}()
	for i := 0; i < n; i++ {
		window <- struct{}{}
		if err := w.Send(getReq(fmt.Sprintf("r%d", i), "")); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Recv(t, read)
	if busy > 0 {
		t.Fatalf("SERVER_BUSY %d times with at most 256 requests outstanding", busy)
	}
}
