package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/oecp/oecp/protocol"
)

func init() {
	register("version", "print the oecp version and protocol version", func(_ []string, stdout, _ io.Writer) int {
		v := "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		fmt.Fprintf(stdout, "oecp %s (protocol %s)\n", v, protocol.Version)
		return exitOK
	})
}
