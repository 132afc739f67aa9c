package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/oecp/oecp/internal/wiretest"
)

// oecpBin is the binary built once for the CLI tests.
var oecpBin string

// withBinary runs the tests with oecpBin built.
type withBinary struct{ *testing.M }

func (w withBinary) Run() int { return wiretest.RunWithBinary(w.M, &oecpBin) }

// TestMain builds the binary, runs the tests and fails them when any left
// a goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(withBinary{m}) }
