package sandbox

import (
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/oecp/oecp/internal/testkit"
	"golang.org/x/sys/unix"
)

// A run's writer UID leased while its workspace is made is the one its
// executions run under, and its end gives it back; a run that ends
// while the lease is being taken keeps none.
func TestWriterLeasedAheadIsTheRuns(t *testing.T) {
	h := &Host{log: slog.New(slog.DiscardHandler), root: true, writers: map[string]*lease{},
		nets:   map[string][]*runNetwork{"run": nil, "late": nil}, // open, as Prepare leaves them
		leases: mustLeases(t, UIDRange{From: 2101000220, To: 2101000222})}
	h.leaseWriter("run")
	ahead := h.writers["run"]
	if ahead == nil {
		t.Fatal("no writer UID leased ahead")
	}
	if l, err := h.writer("run"); err != nil || l != ahead {
		t.Fatalf("the run's execution leased %v (%v), not the UID leased ahead", l, err)
	}
	h.leaseWriter("run") // leased already: nothing more
	if n := len(h.leases.held); n != 1 {
		t.Fatalf("%d UIDs held, want the run's one", n)
	}
	h.CloseRun("run")
	if n := len(h.leases.held); n != 0 {
		t.Fatalf("%d UIDs held after the run's end", n)
	}

	inScan, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	procScanHook = func() { once.Do(func() { close(inScan); <-release }) }
	t.Cleanup(func() { procScanHook = nil })
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.leaseWriter("late")
	}()
	testkit.Recv(t, inScan)
	h.CloseRun("late")
	close(release)
	testkit.Recv(t, done)
	h.leases.mu.Lock()
	held := len(h.leases.held)
	h.leases.mu.Unlock()
	if _, ok := h.writers["late"]; ok || held != 0 {
		t.Fatalf("a run ended during its lease keeps a writer UID (%d held)", held)
	}
}

// newNetNamespace makes a namespace of its own each time, neither the
// server's nor another's, and the server stays in its own.
func TestNewNetNamespaceIsNew(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	ino := func(f *os.File) uint64 {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	own, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	a, err := newNetNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := newNetNamespace()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if ino(a) == ino(own) || ino(b) == ino(own) || ino(a) == ino(b) {
		t.Fatalf("namespaces %d and %d, the server's %d", ino(a), ino(b), ino(own))
	}
	after, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if ino(after) != ino(own) {
		t.Fatal("the server left its own network namespace")
	}
}
