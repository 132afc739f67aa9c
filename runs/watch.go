package runs

import (
	"context"
	"encoding/json"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/store"
)

// run/watch and run/logs read a run's records from the store strictly
// after their position, a page at a time, and wait for the next commit
// when they have caught up; replay and live delivery are the same read,
// so they can neither gap nor duplicate. Both close with done once they
// have passed the run's terminal record. They wait without a goroutine
// (recordStream.PollBatch): the call they arm with their run's signal
// before each read starts their subscription's loop at the run's next
// write, and on a shared store at another replica's next commit too. The
// first page is read in the same read transaction that resolves the run.

// tail reads one run's records in order after a position.
type tail struct {
	st        store.Store
	wake      *signals
	shared    bool // st is written by other replicas too (store.IsShared)
	tk, runID string
	after     uint64
	buf       []store.Event
	// ended: the run's terminal record has been read; nothing follows it.
	ended bool
	// caught, when set, holds the wake-ups taken before the read that
	// emptied the run's records (a partial page): nothing is new until
	// one of them fires.
	caught *wakeups
	// armed is the call armed with the run's signal before the tail's
	// last read (open arms one for every tail; a blocking reader ignores
	// it); idle says that read emptied the run's records, so a parked
	// reader has nothing new until armed fires.
	armed *armedCall
	idle  bool
}

// close takes back the call t armed: a tail that is gone leaves nothing
// behind for a run that may never be written again. On a store of this
// process a fired call is gone already; on a shared store one fired by
// another replica's commit is still armed with the run.
func (t *tail) close() {
	if a := t.armed; a != nil && (t.shared || !a.fired.Load()) {
		t.wake.disarm(runKey{t.tk, t.runID}, a)
	}
}

// wakeups are what a caught-up tail waits on: its run's signal and, on a
// shared store, every commit.
type wakeups struct{ local, remote <-chan struct{} }

// next returns the next record, or ok false once the run has finished
// and every record up to its terminal has been read.
func (t *tail) next(ctx context.Context) (ev store.Event, rec record, ok bool, err error) {
	ev, rec, ok, _, err = t.step(ctx, nil)
	return ev, rec, ok, err
}

// step is next, except that with wake set it does not wait: when nothing
// is new it returns parked, having arranged for wake to be called at the
// run's next write (or, on a shared store, at another replica's next
// commit).
func (t *tail) step(ctx context.Context, wake func()) (ev store.Event, rec record, ok, parked bool, err error) {
	for {
		if len(t.buf) > 0 {
			ev, t.buf = t.buf[0], t.buf[1:]
			if len(t.buf) == 0 {
				t.buf = nil // a waiting tail keeps no page
			}
			t.after = ev.Seq
			if err := json.Unmarshal(ev.Body, &rec); err != nil {
				return ev, rec, false, false, err
			}
			t.ended = rec.Kind == recTerminal
			return ev, rec, true, false, nil
		}
		if t.ended {
			return ev, rec, false, false, nil
		}
		if err := ctx.Err(); err != nil {
			return ev, rec, false, false, err
		}
		var w *wakeups
		if wake != nil {
			a := t.armed
			if a != nil {
				a.setWake(wake)
			}
			switch {
			case a != nil && !a.fired.Load() && t.idle:
				// Caught up, and the call armed before the read that
				// showed it has not fired: nothing is new, and its fire
				// now calls wake.
				return ev, rec, false, true, nil
			case a == nil || a.fired.Load():
				// Armed before the read, so a write after it fires.
				if a != nil && t.shared {
					t.wake.disarm(runKey{t.tk, t.runID}, a) // fired by the other
				}
				t.armed = t.wake.arm(runKey{t.tk, t.runID}, wake)
			}
		} else {
			if w := t.caught; w != nil {
				t.caught = nil
				if err := w.wait(ctx); err != nil {
					return ev, rec, false, false, err
				}
			}
			w = &wakeups{local: t.wake.wait(runKey{t.tk, t.runID})}
			// Another replica's write wakes no local signal; on a shared
			// store its commit is seen through the store (remoteChanges).
			if t.shared {
				w.remote = remoteChanges(t.st)
			}
		}
		finished, err := t.read(ctx)
		t.idle = false
		switch {
		case err != nil:
			return ev, rec, false, false, err
		case len(t.buf) > 0:
			if len(t.buf) < protocol.ReplayPageSize {
				t.caught, t.idle = w, true
			}
		case finished:
			return ev, rec, false, false, nil
		default:
			t.caught, t.idle = w, true
		}
	}
}

// read reads the next page of records; when there is none it reports
// whether the run has finished.
func (t *tail) read(ctx context.Context) (finished bool, err error) {
	err = t.st.View(ctx, func(tx store.ReadTx) error {
		var err error
		if t.buf, err = tx.Events(t.tk, t.runID, t.after, protocol.ReplayPageSize); err != nil || len(t.buf) > 0 {
			return err
		}
		st, _, _, err := loadRun(tx, t.tk, t.runID)
		finished = st != nil && st.Phase == PhaseFinished
		return err
	})
	return finished, err
}

func (w *wakeups) wait(ctx context.Context) error {
	select {
	case <-w.local:
	case <-w.remote:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// SubscribeResult is the result of run/watch and run/logs (the cursor
// they start strictly after) and of run/attach (the execution).
type SubscribeResult struct {
	SubscriptionID string `json:"subscriptionId"`
	RunID          string `json:"runId"`
	AtCursor       string `json:"atCursor,omitempty"`
	Execution      string `json:"execution,omitempty"`
}

// open resolves a run and a starting cursor (default: before the first
// record) for a new watch or logs stream; it also returns the run's
// state as it read it.
func (b *Backend) open(ctx context.Context, runID string, fromCursor *string) (*tail, string, *runState, error) {
	tk := b.tenant(ctx)
	t := &tail{st: b.store, wake: &b.wake, shared: store.IsShared(b.store), tk: tk, runID: runID}
	// The first page is read with the run, and the call that wakes the
	// stream is armed before that read (see tail.step).
	t.armed = t.wake.arm(runKey{tk, runID}, nil)
	at := cursorString(0)
	var st *runState
	err := b.store.View(ctx, func(tx store.ReadTx) error {
		var ok bool
		var err error
		st, _, ok, err = loadRun(tx, tk, runID)
		if err == nil && !ok {
			err = compactedCursor(tx, fromCursor)
		}
		if err != nil || !ok {
			return orNoRun(err)
		}
		if fromCursor != nil {
			seq, ok := parseCursor(*fromCursor)
			if ok && seq > 0 {
				ev, found, err := tx.Event(tk, seq)
				if err != nil {
					return err
				}
				ok = found && ev.RunID == runID
			}
			if !ok {
				return protocol.AppError(protocol.InvalidPhase, protocol.MsgCursorUnavailable, map[string]any{"currentCursor": cursorString(st.Cursor)})
			}
			t.after, at = seq, *fromCursor
		}
		t.buf, err = tx.Events(tk, runID, t.after, protocol.ReplayPageSize)
		t.idle = len(t.buf) > 0 && len(t.buf) < protocol.ReplayPageSize
		return err
	})
	if err != nil {
		t.close()
		return nil, "", nil, wire(err)
	}
	return t, at, st, nil
}

// Watch replays a run's status projections after fromCursor, one per
// non-log record, and follows them until the terminal one.
func (b *Backend) Watch(ctx context.Context, runID string, fromCursor *string) (*server.Subscription, error) {
	t, at, st, err := b.open(ctx, runID, fromCursor)
	if err != nil {
		return nil, err
	}
	prefix, err := watchPrefix(runID, st)
	if err != nil {
		t.close()
		return nil, err
	}
	id := b.nextSubscription("watch")
	return &server.Subscription{ID: id, Result: &SubscribeResult{SubscriptionID: id, RunID: runID, AtCursor: at},
		Stream: &recordStream{t: t, format: watchEvent(prefix)}, TrackCursor: true}, nil
}

// watchPrefix is the constant head of a run's watch events.
func watchPrefix(runID string, st *runState) ([]byte, error) {
	head, err := protocol.Marshal(struct {
		RunID  string `json:"runId"`
		Title  string `json:"title"`
		Source Source `json:"source"`
		Size   string `json:"size"`
	}{runID, st.Title, st.Source, st.Size})
	if err != nil {
		return nil, err
	}
	head[0] = ','
	return head[:len(head)-1], nil
}

// recordStream yields a run's records that format turns into event
// members (nil skips a record), then closes with done after the terminal.
type recordStream struct {
	t      *tail
	format func(cursor string, rec record) []byte
	err    error // met after the first notification of a batch
}

func (s *recordStream) Next(ctx context.Context) (server.Notification, error) {
	n, _, err := s.first(ctx, nil)
	return n, err
}

// first returns the next notification, waiting for it unless wake is set
// (see tail.step): then, when nothing is new, it returns parked.
func (s *recordStream) first(ctx context.Context, wake func()) (_ server.Notification, parked bool, _ error) {
	for {
		ev, rec, ok, parked, err := s.t.step(ctx, wake)
		if err != nil || parked {
			return server.Notification{}, parked, err
		}
		if !ok {
			return server.Notification{Closed: "done"}, false, nil
		}
		c := cursorString(ev.Seq)
		if rest := s.format(c, rec); rest != nil {
			return server.Notification{Rest: rest, Cursor: c}, false, nil
		}
	}
}

func (s *recordStream) Close() { s.t.close() }

// NextBatch returns the next notification as Next does, then those that
// follow it without waiting: the records of the page already read, and
// the done after the terminal record. An error after the first is kept
// for the next call, so that nothing already read is lost.
func (s *recordStream) NextBatch(ctx context.Context, buf []server.Notification, max int) ([]server.Notification, error) {
	return s.batch(ctx, buf, max, nil)
}

// PollBatch is NextBatch without waiting: when nothing is new it returns
// nothing, and wake is called at the run's next write (or, on a shared
// store, at another replica's next commit).
func (s *recordStream) PollBatch(ctx context.Context, buf []server.Notification, max int, wake func()) ([]server.Notification, error) {
	return s.batch(ctx, buf, max, wake)
}

func (s *recordStream) batch(ctx context.Context, buf []server.Notification, max int, wake func()) ([]server.Notification, error) {
	if err := s.err; err != nil {
		s.err = nil
		return buf, err
	}
	n, parked, err := s.first(ctx, wake)
	if err != nil || parked {
		return buf, err
	}
	buf = append(buf, n)
	for n.Closed == "" && len(buf) < max {
		var ok bool
		if n, ok, err = s.ready(); err != nil {
			s.err = err
		}
		if !ok {
			break
		}
		buf = append(buf, n)
	}
	return buf, nil
}

// ready returns the next notification if the stream has it without
// waiting: from the page already read, or done after the terminal.
func (s *recordStream) ready() (server.Notification, bool, error) {
	for len(s.t.buf) > 0 {
		ev, rec, _, err := s.t.next(context.Background()) // pops the page: never waits
		if err != nil {
			return server.Notification{}, false, err
		}
		c := cursorString(ev.Seq)
		if rest := s.format(c, rec); rest != nil {
			return server.Notification{Rest: rest, Cursor: c}, true, nil
		}
	}
	if s.t.ended {
		return server.Notification{Closed: "done"}, true, nil
	}
	return server.Notification{}, false, nil
}

// watchEvent formats a non-log record as a watch event's members.
func watchEvent(prefix []byte) func(string, record) []byte {
	return func(c string, rec record) []byte {
		if rec.Kind == recLog {
			return nil
		}
		rest := append([]byte(nil), prefix...)
		rest = append(rest, `,"cursor":`...)
		rest = protocol.AppendString(rest, c)
		rest = append(rest, `,"status":`...)
		return append(rest, rec.Status...)
	}
}

// Logs replays a run's log records after fromCursor (only execution's,
// when given) and follows them until the run's terminal record.
func (b *Backend) Logs(ctx context.Context, runID string, fromCursor, execution *string) (*server.Subscription, error) {
	t, at, _, err := b.open(ctx, runID, fromCursor)
	if err != nil {
		return nil, err
	}
	only := ""
	if execution != nil {
		only = *execution
	}
	s := &recordStream{t: t, format: logEvent(runID, only)}
	id := b.nextSubscription("logs")
	return &server.Subscription{ID: id, Result: &SubscribeResult{SubscriptionID: id, RunID: runID, AtCursor: at},
		Stream: s, TrackCursor: true, MaxEventBytes: protocol.MaxNotificationBytes}, nil
}

// logEvent formats a log record (of execution only, when set) as a logs
// event's members.
func logEvent(runID, only string) func(string, record) []byte {
	prefix := append([]byte(`,"runId":`), protocol.AppendString(nil, runID)...)
	return func(c string, rec record) []byte {
		if rec.Kind != recLog || (only != "" && rec.Execution != only) {
			return nil
		}
		rest := append([]byte(nil), prefix...)
		rest = append(rest, `,"cursor":`...)
		rest = protocol.AppendString(rest, c)
		if rec.Execution != "" {
			rest = append(rest, `,"execution":`...)
			rest = protocol.AppendString(rest, rec.Execution)
		}
		rest = append(rest, `,"record":`...)
		return append(rest, rec.Detail...)
	}
}
