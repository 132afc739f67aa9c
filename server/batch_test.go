package server_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// batchBackend serves one watch whose stream hands out scripted batches.
type batchBackend struct {
	server.EmptyBackend
	batches [][]server.Notification
	maxSize int
}

func (b *batchBackend) Watch(context.Context, protocol.WatchParams) (*server.Subscription, error) {
	s := &batchStream{batches: b.batches}
	return &server.Subscription{ID: "w", Result: &protocol.SubscriptionResult{SubscriptionID: "w"}, Stream: s, TrackCursor: true, MaxEventBytes: b.maxSize}, nil
}

type batchStream struct{ batches [][]server.Notification }

func (s *batchStream) Next(ctx context.Context) (server.Notification, error) {
	panic("a BatchStream is read in batches")
}

func (s *batchStream) NextBatch(ctx context.Context, buf []server.Notification, max int) ([]server.Notification, error) {
	if len(s.batches) == 0 {
		<-ctx.Done()
		return buf, io.EOF
	}
	b := s.batches[0]
	s.batches = s.batches[1:]
	return append(buf, b...), nil
}

func (s *batchStream) Close() {}

func ev(i int) server.Notification {
	c := fmt.Sprintf("c%d", i)
	return server.Notification{Rest: []byte(`,"cursor":"` + c + `"`), Cursor: c}
}

func evFrame(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":"w","cursor":"c%d"}}`, i)
}

// A stream's batches go out in order, each as written, up to a Closed
// that names the last cursor delivered.
func TestBatchedEventsKeepOrderUpToTheClose(t *testing.T) {
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) {
			b := &batchBackend{batches: [][]server.Notification{
				{ev(1), ev(2), ev(3)},
				{ev(4)},
				{ev(5), ev(6), {Closed: protocol.SlowConsumer}},
			}}
			w := bd.start(t, b)
			send(t, w, `{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`)
			expect(t, w, `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"w"}}`)
			for i := 1; i <= 6; i++ {
				expect(t, w, evFrame(i))
			}
			expect(t, w, `{"jsonrpc":"2.0","method":"subscription/closed","params":{"subscriptionId":"w","reason":"SLOW_CONSUMER","lastDeliveredCursor":"c6"}}`)
			roundTrip(t, w, "after")
		})
	}
}

// An event over the subscription's size bound ends it silently: the
// events before it in its batch are delivered, nothing after.
func TestBatchEndsSilentlyAtAnOversizedEvent(t *testing.T) {
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) {
			big := server.Notification{Rest: []byte(`,"x":"` + strings.Repeat("x", 100) + `"`), Cursor: "big"}
			b := &batchBackend{maxSize: 64, batches: [][]server.Notification{
				{ev(1), ev(2), big, ev(3)},
				{ev(4)},
			}}
			w := bd.start(t, b)
			send(t, w, `{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`)
			expect(t, w, `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"w"}}`)
			expect(t, w, evFrame(1))
			expect(t, w, evFrame(2))
			roundTrip(t, w, "after")
		})
	}
}

var _ server.BatchStream = (*batchStream)(nil)

// A batch larger than one flush's worth of bytes arrives whole and in
// order.
func TestLargeBatchArrivesWhole(t *testing.T) {
	pad := strings.Repeat("p", 1000)
	var batch []server.Notification
	for i := range 200 {
		c := fmt.Sprintf("c%d", i)
		batch = append(batch, server.Notification{Rest: []byte(`,"cursor":"` + c + `","pad":"` + pad + `"`), Cursor: c})
	}
	for _, bd := range bindings {
		t.Run(bd.name, func(t *testing.T) {
			w := bd.start(t, &batchBackend{batches: [][]server.Notification{batch}})
			send(t, w, `{"jsonrpc":"2.0","id":1,"method":"watch","params":{}}`)
			expect(t, w, `{"jsonrpc":"2.0","id":1,"result":{"subscriptionId":"w"}}`)
			for i := range 200 {
				expect(t, w, fmt.Sprintf(`{"jsonrpc":"2.0","method":"event","params":{"subscriptionId":"w","cursor":"c%d","pad":"%s"}}`, i, pad))
			}
			roundTrip(t, w, "after")
		})
	}
}
