package store_test

import (
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/storetest"
)

func TestMemoryLeases(t *testing.T) {
	storetest.RunLeases(t, func(*testing.T) store.Store { return store.NewMemory() })
}
