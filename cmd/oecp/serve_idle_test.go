package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oecp/oecp/client"
)

// TestServeIdleExit: serve --idle-exit keeps serving while a connection is
// open and while a run is unfinished with no connection open, and stops
// gracefully (exit 0, the reason logged) once neither holds it.
func TestServeIdleExit(t *testing.T) {
	const idle = 200 * time.Millisecond
	srv := startServer(t, "--idle-exit", idle.String())
	ctx := context.Background()
	conn, err := client.Dial(ctx, srv.url, client.DialOptions{AllowPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	// Several idle periods with nothing but the connection open.
	time.Sleep(5 * idle)
	if _, err := conn.Get(ctx, client.GetParams{}); err != nil {
		t.Fatalf("the server stopped while a connection was open: %v", err)
	}
	expect(t, oecp(t, srv, "apply", "-f", sleepy, "--input", sleepLong), 0, nil, nil)
	_ = conn.Close()
	// Several idle periods with no connection, and the run going on.
	time.Sleep(5 * idle)
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
