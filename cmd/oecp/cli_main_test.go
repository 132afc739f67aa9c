package main

import (
	"os"
	"testing"

	"github.com/oecp/oecp/internal/wiretest"
)

// oecpBin is the binary built once for the CLI tests.
var oecpBin string

func TestMain(m *testing.M) { os.Exit(wiretest.RunWithBinary(m, &oecpBin)) }
