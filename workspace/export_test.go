package workspace

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
)

// Spreads reports whether dir carries the placement hint of runs removed
// at once.
var Spreads = spreads

// SetSpread sets or clears that hint.
var SetSpread = setSpread

// KeptPacks is the bound on the packs snapshots keep as git wrote them.
const KeptPacks = keptPacks

// KeptTrees is how many checked-out trees m keeps in memory.
func KeptTrees(m *Manager) int {
	m.kept.mu.Lock()
	defer m.kept.mu.Unlock()
	return len(m.kept.trees)
}

// SpoilKept replaces the bytes of the file at path in every tree m keeps,
// so that a test can tell a checkout written from them.
func SpoilKept(m *Manager, path string, data []byte) {
	m.kept.mu.Lock()
	defer m.kept.mu.Unlock()
	for _, t := range m.kept.trees {
		for i := range t.entries {
			if t.entries[i].git.path == path {
				t.entries[i].data = data
			}
		}
	}
}

// Spares is how many work trees m has written ahead or is writing.
func Spares(m *Manager) int {
	m.spares.mu.Lock()
	defer m.spares.mu.Unlock()
	return len(m.spares.made)
}

// SparesDir is where m writes work trees ahead.
func SparesDir(m *Manager) string { return filepath.Join(m.root, sparesDir) }

// AwaitSpares waits until m's spares being written are written (failing
// t past testkit's bound).
func AwaitSpares(t testing.TB, m *Manager) {
	t.Helper()
	m.spares.mu.Lock()
	var writing []*spare
	for _, sp := range m.spares.made {
		writing = append(writing, sp)
	}
	m.spares.mu.Unlock()
	for _, sp := range writing {
		testkit.Recv(t, sp.done)
	}
}

// DiscardSpares waits for m's spares being written and removes every
// spare, so that the next checkout is written from the kept tree.
func DiscardSpares(t testing.TB, m *Manager) {
	t.Helper()
	AwaitSpares(t, m)
	m.spares.mu.Lock()
	for key, sp := range m.spares.made {
		m.spares.removeLocked(key, sp)
	}
	m.spares.mu.Unlock()
}

// HoldSpares has each of m's spares wait, before it is written, until
// release is called. Each spare written sends the inode of its file at
// rel to written (0 when it has none); waiting receives once a checkout
// begins to wait for a spare.
func HoldSpares(m *Manager, rel string) (release func(), written <-chan uint64, waiting <-chan struct{}) {
	hold := make(chan struct{})
	w, wt := make(chan uint64, 16), make(chan struct{}, 16)
	m.spares.beforeWrite = func() { <-hold }
	m.spares.written = func(work string) {
		var ino uint64
		if info, err := os.Lstat(filepath.Join(work, filepath.FromSlash(rel))); err == nil {
			ino = info.Sys().(*syscall.Stat_t).Ino
		}
		w <- ino
	}
	m.spares.waiting = func() { wt <- struct{}{} }
	return sync.OnceFunc(func() { close(hold) }), w, wt
}

// SetGitWrites has git write every snapshot's commit of m (on), or the
// host write the small ones (off, the default).
func SetGitWrites(m *Manager, on bool) { m.gitWrites = on }

// HostWriteMax bounds the new bytes of a snapshot the host writes itself.
const HostWriteMax = hostWriteMax
