package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/oecp/oecp/engine/worker"
	"github.com/oecp/oecp/internal/testkit"
)

// TestDiskWatchEndsATreeThatGrowsPastItsLimit: the watch measures at
// once and then at every interval; a tree under the limit is left alone,
// one that grows past it is reported once, with its bytes.
func TestDiskWatchEndsATreeThatGrowsPastItsLimit(t *testing.T) {
	ws := t.TempDir()
	testkit.WriteFile(t, filepath.Join(ws, "small"), 10)
	synctest.Test(t, func(t *testing.T) {
		stop, done := make(chan struct{}), make(chan struct{})
		over := make(chan int64, 2)
		go watchDisk([]string{ws}, 1<<20, stop, done, func(n int64, why error) {
			if why != nil {
				t.Errorf("over for %v", why)
			}
			over <- n
		})
		synctest.Wait()
		if len(over) != 0 {
			t.Fatalf("a tree under its limit was reported")
		}
		testkit.WriteFile(t, filepath.Join(ws, "big"), 2<<20)
		synctest.Wait()
		if len(over) != 0 {
			t.Fatalf("reported before the next measurement")
		}
		<-done // the next measurement, an interval later (fake time)
		if n := <-over; n <= 1<<20 {
			t.Errorf("reported %d bytes", n)
		}
		if len(over) != 0 {
			t.Errorf("reported twice")
		}
	})
	// A watch that is stopped returns without reporting.
	synctest.Test(t, func(t *testing.T) {
		stop, done := make(chan struct{}), make(chan struct{})
		go watchDisk([]string{t.TempDir()}, 1<<20, stop, done, func(int64, error) { t.Error("reported") })
		synctest.Wait()
		close(stop)
		<-done
	})
}

// TestDiskLimitEndsTheExecution: with --agent-max-disk set, a writer that
// writes past it is killed with its sandbox, and the execution names the
// limit it hit.
func TestDiskLimitEndsTheExecution(t *testing.T) {
	ws := t.TempDir()
	h := requireHost(t, Config{MaxDisk: 4 << 20})
	defer h.CloseRun("r")
	e, err := h.Start(Spec{Run: "r", Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	script := `head -c 16777216 /dev/zero > "$PWD/fill" && echo filled && exec sleep 600`
	res := worker.Process{Argv: []string{"/bin/sh", "-c", script}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
		MaxStdout: 1 << 16, Confine: e.Confine}.Run(context.Background())
	if res.Exit == nil {
		t.Fatalf("the execution ended cleanly: %q", res.Stdout)
	}
	if got := e.Limit(); got != LimitDisk {
		t.Fatalf("limit %q, want %q (stdout %q, exit %v)", got, LimitDisk, res.Stdout, res.Exit)
	}
}

// requireHost is New(cfg), or a skip where this host has no sandbox (a
// failure under OECP_REQUIRE_SANDBOX=1).
func requireHost(t *testing.T, cfg Config) *Host {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		if os.Getenv("OECP_REQUIRE_SANDBOX") == "1" || !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		t.Skipf("needs the agent sandbox: %v", err)
	}
	t.Cleanup(h.Close)
	return h
}
