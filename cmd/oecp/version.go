package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/oecp/oecp/protocol"
)

func runVersion(_ []string, stdout, _ io.Writer) error {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "oecp %s (protocol %s)\n", v, protocol.Version)
	return nil
}
