package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/oecp/oecp/capsule"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/oecp/oecp/workspace/checkpoint"
)

// checkpointConfig configures the checkpoints that move a native run's
// workspace to another server (or to this one after its data directory
// was lost).
type checkpointConfig struct {
	maxBytes int64
	push     bool
}

func (c *checkpointConfig) addFlags(fs *pflag.FlagSet) {
	fs.Int64Var(&c.maxBytes, "checkpoint-max-bytes", checkpoint.DefaultMaxBytes, "after each agent step, keep the run's workspace in the store as a git bundle of at most `N` bytes (a larger one is skipped and logged; 0: no checkpoints, a run whose server is lost ends runtime_lost)")
	fs.BoolVar(&c.push, "checkpoint-push", false, "push checkpoints to a hidden ref (refs/oecp/checkpoints/BRANCH) of the repository's remote instead of keeping them in the store")
}

func (c *checkpointConfig) validate() error {
	if c.maxBytes < 0 {
		return fmt.Errorf("--checkpoint-max-bytes %d: want 0 (no checkpoints) or more", c.maxBytes)
	}
	return nil
}

// apply sets the capsule's checkpoint options.
func (c *checkpointConfig) apply(o *capsule.Options) {
	o.CheckpointMaxBytes, o.CheckpointPush = c.maxBytes, c.push
	if c.maxBytes == 0 {
		o.CheckpointMaxBytes = -1
	}
}

// runDir is where a store that keeps no directory of its own (postgres)
// keeps its runs' workspaces: DIR/runs under --data (default: the sqlite
// store's default directory), never the system's temporary directory,
// which replicas on one host would share and a reboot wipes.
func runDir(dataDir string) (string, error) {
	if dataDir == "" {
		d, err := sqlite.DefaultDir()
		if err != nil {
			return "", fmt.Errorf("no --data directory given for the runs' workspaces and no default: %w", err)
		}
		dataDir = d
	}
	dir := filepath.Join(dataDir, "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("runs' workspaces: %w", err)
	}
	return dir, nil
}
