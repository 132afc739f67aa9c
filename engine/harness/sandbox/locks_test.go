package sandbox

import (
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/internal/testkit"
)

// Leasing a run's writer UID scans /proc without holding the host's lock:
// while one run's lease waits inside the scan, another run's CloseRun
// (which takes that lock) completes.
func TestWriterLeaseScanHoldsNoHostLock(t *testing.T) {
	h := &Host{log: slog.New(slog.DiscardHandler), root: true, writers: map[string]*lease{}, nets: map[string][]*runNetwork{},
		leases: mustLeases(t, UIDRange{From: 2101000200, To: 2101000201})}
	inScan, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	procScanHook = func() { once.Do(func() { close(inScan); <-release }) }
	t.Cleanup(func() { procScanHook = nil })
	leased := make(chan error, 1)
	go func() {
		_, err := h.writer("run-a")
		leased <- err
	}()
	testkit.Recv(t, inScan)
	testkit.CompletesWhileHeld(t, release, 30*time.Second, func() error {
		h.CloseRun("run-b")
		return nil
	}, "CloseRun of another run waited for a writer lease's /proc scan")
	if err := testkit.Recv(t, leased); err != nil {
		t.Fatal(err)
	}
	h.CloseRun("run-a")
}

// Two executions of one run leasing its writer UID at once get the same
// lease, and the spare UID is given back.
func TestConcurrentWriterLeasesAgree(t *testing.T) {
	h := &Host{log: slog.New(slog.DiscardHandler), root: true, writers: map[string]*lease{}, nets: map[string][]*runNetwork{},
		leases: mustLeases(t, UIDRange{From: 2101000210, To: 2101000211})}
	var wg sync.WaitGroup
	got := make([]*lease, 2)
	for i := range got {
		wg.Go(func() {
			l, err := h.writer("run")
			if err != nil {
				t.Error(err)
			}
			got[i] = l
		})
	}
	testkit.Wait(t, &wg)
	if got[0] == nil || got[0] != got[1] {
		t.Fatalf("two writer leases of one run: %v %v", got[0], got[1])
	}
	h.leases.mu.Lock()
	held := len(h.leases.held)
	h.leases.mu.Unlock()
	if held != 1 {
		t.Fatalf("%d UIDs held for one run's writer", held)
	}
	h.CloseRun("run")
}

// A busy cgroup is retried with a pause between tries that grows up to
// its bound, what is left in it killed before each pause; a group that
// stays busy is given up after removeWait and reported.
func TestCgroupRemovalPausesAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tries []time.Time
		kills := 0
		busyFor := 5
		remove := func(string) error {
			tries = append(tries, time.Now())
			if len(tries) <= busyFor {
				return syscall.EBUSY
			}
			return nil
		}
		if err := removeGroupDir("g", remove, func(string) { kills++ }); err != nil {
			t.Fatalf("removed after %d busy tries: %v", busyFor, err)
		}
		if len(tries) != busyFor+1 || kills != busyFor {
			t.Fatalf("%d tries, %d kills; want %d, %d", len(tries), kills, busyFor+1, busyFor)
		}
		for i := 2; i < len(tries); i++ {
			if prev, gap := tries[i-1].Sub(tries[i-2]), tries[i].Sub(tries[i-1]); prev <= 0 || gap < prev {
				t.Fatalf("pauses between tries %v then %v: none, or shrinking", prev, gap)
			}
		}

		tries, kills, busyFor = nil, 0, int(^uint(0)>>1)
		err := removeGroupDir("g", remove, func(string) { kills++ })
		if !errors.Is(err, syscall.EBUSY) {
			t.Fatalf("a group that stays busy: %v", err)
		}
		// Pauses growing to removeMaxPause over removeWait.
		if most := int(removeWait/removeMaxPause) + 20; len(tries) > most {
			t.Fatalf("%d tries before giving up, more than %d", len(tries), most)
		}
	})
}
