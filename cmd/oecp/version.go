package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/oecp/oecp/protocol"
	"github.com/spf13/cobra"
)

func versionCmd(stdout, stderr io.Writer) *cobra.Command {
	fs := newFlags("version", "version [--json]", "Prints the version of oecp and of the protocol it speaks.", stdout, stderr)
	asJSON := fs.Bool("json", false, `print {"version","protocolVersion"} as JSON`)
	return fs.run(func(args []string) error {
		if len(args) > 0 {
			return fs.usageErr("unexpected argument %q", args[0])
		}
		v := "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		if *asJSON {
			b, _ := json.Marshal(struct {
				Version         string `json:"version"`
				ProtocolVersion string `json:"protocolVersion"`
			}{v, protocol.Version})
			fmt.Fprintf(stdout, "%s\n", b)
			return nil
		}
		fmt.Fprintf(stdout, "oecp %s (protocol %s)\n", v, protocol.Version)
		return nil
	})
}
