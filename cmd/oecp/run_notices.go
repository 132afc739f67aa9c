package main

import (
	"context"
	"strings"
	"sync"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/internal/syncio"
)

// notices prints, while `run watch` follows a run, the log records people
// must see, which the run's status does not carry: an agent CLI retrying
// its provider (harness.RetryRecordPrefix). They come two ways: live, from
// a stream of the run's log that starts at its tail when the watch began
// (follow), and with each execution that ends, from its own records
// (ended), which also covers what happened before the watch began. Each
// record is printed once, by whichever way brings it first; lines go out
// whole, the watch's status lines and these from two goroutines.
type notices struct {
	c       *cli
	runID   string
	mu      sync.Mutex
	printed map[string]bool // by cursor
}

// newNotices makes c.stdout safe for the two goroutines that print.
func newNotices(c *cli, runID string) *notices {
	c.stdout = syncio.NewWriter(c.stdout)
	return &notices{c: c, runID: runID, printed: map[string]bool{}}
}

// follow prints live notices of the run strictly after cursor, on a
// stream of its own that resumes after drops, until stop, which returns
// once nothing more will be printed.
func (n *notices) follow(s *session, cursor string) (stop func()) {
	ctx, cancel := context.WithCancel(s.ctx)
	f, err := client.FollowRunLogs(ctx, client.FollowOptions{RunID: n.runID, FromCursor: cursor, Conn: s.conn, Dial: s.dial}, "")
	if err != nil {
		cancel()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range f.Events() {
			if strings.HasPrefix(ev.Record.Message, harness.RetryRecordPrefix) {
				n.print(ev)
			}
		}
	}()
	return func() {
		cancel()
		f.Close()
		<-done
	}
}

// ended prints an ended execution's notices not printed yet.
func (n *notices) ended(evs []client.RunLogEvent) {
	for _, ev := range evs {
		n.print(ev)
	}
}

func (n *notices) print(ev client.RunLogEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.printed[ev.Cursor] {
		return
	}
	n.printed[ev.Cursor] = true
	line := noticeLine(n.runID, ev)
	if n.c.output == "wide" {
		line = ev.Cursor + " " + line
	}
	n.c.stampedLine(n.c.stdout, line, n.c.replayed(ev.Cursor))
}

// noticeLine is a notice as a watch line: the execution's node, the
// notice, and the execution ("implement retrying: … (execution R/implement/1)").
func noticeLine(runID string, ev client.RunLogEvent) string {
	node := "run"
	if rest, ok := strings.CutPrefix(ev.Execution, runID+"/"); ok {
		node, _, _ = strings.Cut(rest, "/")
	}
	line := node + " " + ev.Record.Message
	if ev.Execution != "" {
		line += " (execution " + ev.Execution + ")"
	}
	return line
}
