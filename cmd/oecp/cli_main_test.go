package main

import (
	"testing"

	"github.com/oecp/oecp/internal/wiretest"
)

// oecpBin is the binary built once for the CLI tests.
var oecpBin string

// TestMain builds the binary, runs the tests and fails them when any left
// a goroutine running.
func TestMain(m *testing.M) { wiretest.MainWithBinary(m, &oecpBin) }
