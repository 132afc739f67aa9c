//go:build !amd64

package sandbox

// gateProgram is empty where oecp-gate is not built: a sandbox's start
// gate is a shell, and setpriv takes the agent's identity.
var gateProgram []byte
