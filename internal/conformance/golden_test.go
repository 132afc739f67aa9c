package conformance

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/oecp/oecp/internal/wiretest"
	"github.com/oecp/oecp/server"
)

var binPath string

func TestMain(m *testing.M) {
	code := wiretest.RunWithBinary(m, &binPath)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// session is a list of golden files replayed in order on one server.
type session []string

// handshakeSessions need no backend state: they pass on any backend.
var handshakeSessions = []session{
	{"initialize.ndjson"},
	{"get-empty.ndjson"},
	{"incompatible-version.ndjson"},
	{"invalid-params.ndjson"},
	{"malformed-request.ndjson"},
	{"rejected-batch.ndjson"},
	{"unknown-method.ndjson"},
}

func loadSession(t *testing.T, s session) []wiretest.Pair {
	t.Helper()
	var pairs []wiretest.Pair
	for _, name := range s {
		p, err := wiretest.ParseGolden(wiretest.GoldenPath(name))
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, p...)
	}
	return pairs
}

// replayEverywhere replays each session byte for byte on a fresh backend
// behind every binding.
func replayEverywhere(t *testing.T, sessions []session, newBackend func() server.Backend, procArgs ...string) {
	for _, s := range sessions {
		pairs := loadSession(t, s)
		name := fmt.Sprint(s)
		t.Run(name+"/in-process", func(t *testing.T) {
			w := wiretest.NewPipe(t, newBackend(), wiretest.Options{InlineReads: true})
			wiretest.Replay(t, w, pairs)
		})
		t.Run(name+"/stdio-process", func(t *testing.T) {
			w := wiretest.StartProc(t, binPath, procArgs...)
			wiretest.Replay(t, w, pairs)
			if _, err := w.CloseSend(); err != nil {
				t.Fatalf("oecp serve --stdio exited with %v; stderr:\n%s", err, w.Stderr)
			}
		})
		t.Run(name+"/websocket", func(t *testing.T) {
			srv := wiretest.NewWSServer(t, newBackend(), wiretest.Options{InlineReads: true})
			wiretest.Replay(t, srv.Dial(t, nil), pairs)
		})
	}
}

func TestHandshakeGoldens(t *testing.T) {
	replayEverywhere(t, handshakeSessions, fixtureBackend, "--backend", "fixture")
}

// admissionSessions need the fixture backend's approving verifier and its
// run-N / cursor-N minting.
var admissionSessions = []session{
	{"admission-lifecycle.ndjson", "admission-errors.ndjson"},
	{"lifecycle-resubmit.ndjson"},
	{"lifecycle-delete.ndjson"},
}

func TestAdmissionGoldens(t *testing.T) {
	replayEverywhere(t, admissionSessions, fixtureBackend, "--backend", "fixture")
}
