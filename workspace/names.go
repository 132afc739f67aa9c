package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// Errors of Prepare. ErrRevisionNotFound is a source revision the
// repository does not have; ErrUnavailable any other failure to make the
// workspace.
var (
	ErrRevisionNotFound = errors.New("source revision not found")
	ErrUnavailable      = errors.New("workspace unavailable")
)

// Key is the directory key of a run: the tenant's hash (tenant names may
// hold any character) and the run id.
func Key(tenant, runID string) string {
	sum := sha256.Sum256([]byte(tenant))
	return hex.EncodeToString(sum[:8]) + "/" + runID
}

// Branch is the run's own branch, the same for every attempt at it: the
// workspace's local branch and the branch delivery pushes. It is
// "oecp/run-" and the first 10 bytes of SHA-256 over the tenant and the
// run id, in hex.
func Branch(tenant, runID string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + runID))
	return "oecp/run-" + hex.EncodeToString(sum[:10])
}
