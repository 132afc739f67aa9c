package worker_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/oecp/oecp/engine/worker"
)

// recordingTap keeps what it is given.
type recordingTap struct {
	mu      sync.Mutex
	argv    []string
	stdin   []byte
	streams map[string]*bytes.Buffer
	done    int
}

func (r *recordingTap) Started(argv []string, stdin []byte) (func(string, []byte), func()) {
	r.argv, r.stdin = argv, stdin
	r.streams = map[string]*bytes.Buffer{"stdout": {}, "stderr": {}}
	return func(stream string, b []byte) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.streams[stream].Write(b)
		}, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.done++
		}
}

// A tap under the context sees the program's argv and stdin and every
// byte of both streams as written (a line without its newline, bytes that
// are not UTF-8, output beyond the line bound of stderr), and its end
// once; the program's own consumers still get their lines.
func TestTapSeesRawStreams(t *testing.T) {
	tap := &recordingTap{}
	long := strings.Repeat("z", 100_000)
	var lines []string
	res := worker.Process{
		Argv:      []string{"/bin/sh", "-c", `cat; printf 'err \377\n%s' "$1" >&2; printf 'last'`, "sh", long},
		Stdin:     []byte("in\n"),
		MaxStdout: 1 << 20,
		Lines:     func(l []byte) { lines = append(lines, string(l)) },
		Tap:       tap,
	}.Run(context.Background())
	if res.Exit != nil || res.StartErr != nil {
		t.Fatalf("run: %+v", res)
	}
	if tap.argv[0] != "/bin/sh" || string(tap.stdin) != "in\n" || tap.done != 1 {
		t.Fatalf("argv %q stdin %q done %d", tap.argv, tap.stdin, tap.done)
	}
	if got := tap.streams["stdout"].String(); got != "in\nlast" || strings.Join(lines, "|") != "in\n|last" {
		t.Fatalf("stdout %q, lines %q", got, lines)
	}
	if got := tap.streams["stderr"].String(); got != "err \377\n"+long {
		t.Fatalf("stderr of %d bytes, want %d", len(got), len("err \377\n"+long))
	}
	// Without a tap nothing is called.
	if res := (worker.Process{Argv: []string{"/bin/true"}}).Run(context.Background()); res.Exit != nil {
		t.Fatalf("untapped run: %+v", res)
	}
}
