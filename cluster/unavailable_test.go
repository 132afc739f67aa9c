package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/oecp/oecp/cluster"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/store"
)

// fullStore is a store on a full disk: reads work, writes and pings fail.
type fullStore struct{ store.Store }

var errFull = fmt.Errorf("%w: database or disk is full", store.ErrUnavailable)

func (fullStore) Update(context.Context, func(store.Tx) error) error { return errFull }
func (fullStore) Ping(context.Context) error                         { return errFull }

// TestStoreUnavailableIsTold: a write the store cannot commit answers
// -32603 with data.code STORE_UNAVAILABLE (a client tells it apart from
// INTERNAL_ERROR, a bug), reads still answer, and Ping reports the
// store's error.
func TestStoreUnavailableIsTold(t *testing.T) {
	b := cluster.New(cluster.Config{Store: fullStore{store.NewMemory()}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer b.Close()
	key := "k"
	_, err := b.Apply(bg, protocol.ApplyParams{Graph: json.RawMessage(goldenGraph), IdempotencyKey: &key})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInternalError || pe.DataCode != cluster.StoreUnavailable || pe.Details != nil {
		t.Fatalf("apply on a full store: %v", err)
	}
	if _, err := b.Get(bg, protocol.GetParams{}); err != nil {
		t.Fatalf("get on a full store: %v", err)
	}
	if err := b.Ping(bg); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ping = %v", err)
	}
	if err := cluster.NewFixture(cluster.Isolated).Ping(bg); err != nil {
		t.Fatalf("ping of a healthy store = %v", err)
	}
}
