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
	fs := newFlags("version", "version [--json]", "Prints the version of oecp, the commit it was built from (when the build recorded one) and the\nversion of the protocol it speaks.")
	asJSON := fs.Bool("json", false, `print {"version","commit","modified","protocolVersion"} as JSON`)
	return fs.run(func(args []string) error {
		if len(args) > 0 {
			return fs.usageErr("unexpected argument %q", args[0])
		}
		bi, _ := debug.ReadBuildInfo()
		b := readBuild(bi)
		if *asJSON {
			out, _ := json.Marshal(struct {
				Version         string `json:"version"`
				Commit          string `json:"commit,omitempty"`
				Modified        bool   `json:"modified,omitempty"`
				ProtocolVersion string `json:"protocolVersion"`
			}{b.version, b.commit, b.modified, protocol.Version})
			fmt.Fprintf(stdout, "%s\n", out)
			return nil
		}
		fmt.Fprintf(stdout, "%s (protocol %s)\n", b, protocol.Version)
		return nil
	})
}

// build is what the binary knows of its own build.
type build struct {
	version  string // the module version, "(devel)" for a build from a checkout
	commit   string // the VCS revision (vcs.revision), "" when not recorded
	modified bool   // the checkout had uncommitted changes (vcs.modified)
}

// readBuild reads the module version and the VCS stamp Go records when it
// builds in a checkout (-buildvcs, on by default); bi may be nil.
func readBuild(bi *debug.BuildInfo) build {
	b := build{version: "(devel)"}
	if bi == nil {
		return b
	}
	if bi.Main.Version != "" {
		b.version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// String is "oecp VERSION, commit REV" (with " plus uncommitted changes"
// when the checkout had some), or "oecp VERSION, commit unknown".
func (b build) String() string {
	switch {
	case b.commit == "":
		return "oecp " + b.version + ", commit unknown"
	case b.modified:
		return "oecp " + b.version + ", commit " + b.commit + " plus uncommitted changes"
	}
	return "oecp " + b.version + ", commit " + b.commit
}
