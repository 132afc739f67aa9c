package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
)

// Discard removes what a run's directory holds of its workspace (the work
// tree, the git directory and the mark of a finished clone), holding the
// run's gate as a writer, so that a workspace that could not be finished
// leaves nothing a later Prepared or Prepare would take for a clone.
func (m *Manager) Discard(ctx context.Context, key string) error {
	release, err := m.Gate(key).Acquire(ctx, true)
	if err != nil {
		return err
	}
	defer release()
	p := m.paths(key)
	err = os.Remove(filepath.Join(p.Dir, preparedFile))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, os.RemoveAll(p.Workspace), os.RemoveAll(p.Git), os.RemoveAll(p.Host))
}
