package sandbox

import _ "embed"

// gateProgram is oecp-gate (gate/gate.c, built by gate/build.sh): the
// start gate and the agent's identity in one small static executable,
// which a sandbox runs instead of a shell and setpriv.
//
//go:embed gate/oecp-gate-amd64
var gateProgram []byte
