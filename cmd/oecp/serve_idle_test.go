package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/server"
)

// TestServeIdleExit: serve --idle-exit keeps serving while a connection is
// open and while a run is unfinished with no connection open, and stops
// gracefully (exit 0, the reason logged) once neither holds it.
func TestServeIdleExit(t *testing.T) {
	// Long enough for the engine to count the run applied below before
	// the connection that applied it has been closed for that long.
	const idle = time.Second
	srv := startServer(t, "--idle-exit", idle.String())
	ctx := context.Background()
	conn, err := client.Dial(ctx, srv.url, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	// Several idle periods with nothing but the connection open.
	time.Sleep(3 * idle)
	if _, err := conn.Get(ctx, client.GetParams{}); err != nil {
		t.Fatalf("the server stopped while a connection was open: %v", err)
	}
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	_ = conn.Close()
	// Several idle periods with no connection, and the run going on.
	time.Sleep(3 * idle)
	expect(t, oecp(t, srv, "get"), 0, []string{"phase:       running"}, nil)
	expect(t, oecp(t, srv, "stop", "--force"), 0, nil, nil)

	deadline := time.After(time.Minute)
	for found := false; !found; {
		select {
		case line, ok := <-srv.logs:
			if !ok {
				t.Fatal("the server's log ended without the idle line")
			}
			found = strings.Contains(line, "idle: no connection and no unfinished run, stopping (--idle-exit)")
		case <-deadline:
			t.Fatal("the idle server did not stop")
		}
	}
	for range srv.logs { // to EOF, so that Wait closes a drained pipe
	}
	if err := srv.cmd.Wait(); err != nil {
		t.Fatalf("the idle server exited with %v", err)
	}
	expect(t, oecp(t, nil, "serve", "--idle-exit", "-1s"), 2, nil, []string{"--idle-exit -1s: want a positive duration"})
	expect(t, oecp(t, nil, "serve", "--stdio", "--idle-exit", "1m"), 2, nil, []string{"--idle-exit applies to the WebSocket listener"})
}

// TestIdleWatchClock: the idle clock starts when the last connection
// closes or the last unfinished run ends; the engine's passes that find
// no run (every few seconds) do not restart it, and an open connection or
// an unfinished run holds the server however long. Fake time (synctest).
func TestIdleWatchClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Minute
		w := newIdleWatch()
		runs := w.engineObserver(nil)
		stopped := make(chan struct{})
		go w.run(t.Context(), d, func() { close(stopped) }, slog.New(slog.DiscardHandler))
		isStopped := func() bool {
			synctest.Wait()
			select {
			case <-stopped:
				return true
			default:
				return false
			}
		}
		conn := w.Open(server.ConnInfo{})
		time.Sleep(10 * d)
		if isStopped() {
			t.Fatal("stopped with a connection open")
		}
		runs.RunsActive(1)
		conn.Closed(server.ConnStats{})
		time.Sleep(10 * d)
		if isStopped() {
			t.Fatal("stopped with a run unfinished")
		}
		runs.RunsActive(0)
		for range 5 { // passes that find no run
			time.Sleep(d / 6)
			runs.RunsActive(0)
		}
		if isStopped() {
			t.Fatal("stopped before the idle period")
		}
		time.Sleep(d / 6)
		if !isStopped() {
			t.Fatal("not stopped once idle for the period")
		}
	})
}
