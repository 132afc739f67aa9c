package store_test

import (
	"testing"

	"github.com/oecp/oecp/store"
	"github.com/oecp/oecp/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}
