package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// vanishedMsg is bwrap's message when a host mount it was binding had
// been removed meanwhile.
const vanishedMsg = `bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/tmp/x/runs": No such file or directory`

// TestProbeRunsAgainWhenAHostMountVanished: a probe whose bwrap failed on
// a host mount removed meanwhile runs again and succeeds; any other
// failure, or the same one every time, is reported with bwrap's words.
func TestProbeRunsAgainWhenAHostMountVanished(t *testing.T) {
	failing := errors.New("exit status 1")
	script := func(outs ...string) (func() ([]byte, error), *int) {
		runs := 0
		return func() ([]byte, error) {
			runs++
			if runs > len(outs) {
				return nil, nil
			}
			return []byte(outs[runs-1]), failing
		}, &runs
	}

	run, runs := script(vanishedMsg)
	if err := retryVanishedMount(run); err != nil || *runs != 2 {
		t.Fatalf("a vanished mount: %v after %d runs, want success after 2", err, *runs)
	}
	run, runs = script("bwrap: No permissions to create new namespace")
	if err := retryVanishedMount(run); err == nil || *runs != 1 || !strings.Contains(err.Error(), "No permissions") {
		t.Fatalf("another failure: %v after %d runs, want it reported after 1", err, *runs)
	}
	run, runs = script(vanishedMsg, vanishedMsg, vanishedMsg, vanishedMsg)
	if err := retryVanishedMount(run); err == nil || *runs != probeAttempts || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("a mount vanishing every time: %v after %d runs, want it reported after %d", err, *runs, probeAttempts)
	}
}
