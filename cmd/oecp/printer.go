package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/protocol"
)

// maxShown bounds a step's output (or a fault's summary) shown on one
// line of human output; longer ones end with "…".
const maxShown = 80

// eventPrinter renders a run's watch events for people (one line each,
// optionally after the local time they arrived), or as JSON / YAML.
type eventPrinter struct {
	c         *cli
	tail      string // the last cursor of the run's history: later events are live
	live      bool
	t         *runTracker
	begun     map[string]time.Time // when each execution began, by label and attempt
	early     map[string]bool      // executions that began before this watch (begun: its start)
	attached  time.Time            // when this watch started
	lastPhase string
	saidHeld  *failure // the hold print last reported
}

func (c *cli) newEventPrinter(historyTail string) *eventPrinter {
	return &eventPrinter{c: c, tail: historyTail, live: historyTail == "", t: newRunTracker(),
		begun: map[string]time.Time{}, early: map[string]bool{}, attached: time.Now()}
}

// line writes one line of text output: with -o wide the run and cursor,
// then s (see streamLine).
func (p *eventPrinter) line(ev client.WatchEvent, s string) {
	if p.c.output == "wide" {
		s = ev.RunID + " " + ev.Cursor + " " + s
	}
	p.c.stampedLine(p.c.stdout, s, !p.live)
}

// print renders ev and reports whether the run holds on a failed step
// from this event on (see runTracker), once per hold.
func (p *eventPrinter) print(ev client.WatchEvent) (holds bool) {
	defer func() {
		if ev.Cursor == p.tail {
			p.live = true
		}
	}()
	prev := p.t.op
	var label string
	if ev.Event.Node != nil {
		label = p.t.label(ev.Event)
	}
	heldNow := p.t.observe(ev.Event)
	defer func() {
		// A hold in the run's history ends the watch only if the run still
		// holds where the history ends.
		if h := p.t.held; h != nil && h != p.saidHeld && (p.live || ev.Cursor == p.tail) {
			p.saidHeld, holds = h, true
		}
	}()
	if p.c.machine() {
		p.c.printRaw(ev.Raw)
		return
	}
	e := ev.Event
	switch e.Type {
	case protocol.EventPhase:
		p.phase(ev, prev)
	case protocol.EventNodeBegin:
		if e.Node != nil {
			key := label + "\x00" + strconv.FormatInt(e.Node.Attempt, 10)
			if p.live {
				p.begun[key] = time.Now()
			} else {
				// It began before this watch: if it ends while the watch
				// is live, it ran at least since the watch started.
				p.begun[key], p.early[key] = p.attached, true
			}
			p.line(ev, label+" started"+attemptNote(e.Node.Attempt))
		}
	case protocol.EventNodeEnd:
		if e.Node != nil {
			p.line(ev, label+" finished"+attemptNote(e.Node.Attempt)+" "+p.settled(label, e))
		}
	case protocol.EventFault:
		var f struct {
			Code     string `json:"code"`
			Severity string `json:"severity"`
			Summary  string `json:"summary"`
		}
		_ = json.Unmarshal(e.Fault, &f)
		p.line(ev, fmt.Sprintf("fault (%s, %s): %s", f.Severity, f.Code, truncate(f.Summary)))
	case protocol.EventBookmark:
		if heldNow {
			p.line(ev, p.t.held.heldLine())
		}
	case protocol.EventFinished:
		if e.FinalStatus != nil {
			p.line(ev, "phase "+e.FinalStatus.Phase)
			p.lastPhase = e.FinalStatus.Phase
		}
	}
	return
}

// phase prints a phase event: the run's start, a change of phase or
// dispatch state, and what an update changed (labels, log level).
func (p *eventPrinter) phase(ev client.WatchEvent, prev *protocol.OperationalStatus) {
	e := ev.Event
	if e.Admission != nil {
		gen := ""
		if e.Status != nil && e.Status.ObservedGeneration != nil {
			gen = " (generation " + strconv.FormatInt(*e.Status.ObservedGeneration, 10) + ")"
		}
		p.line(ev, "run "+e.Admission.RunID+" started"+gen)
		prev = nil
	}
	if e.Status == nil {
		return
	}
	ph := e.Status.Phase
	op := e.Status.Operational
	if op != nil {
		ph += ", " + op.DispatchState
	}
	if ph != p.lastPhase {
		p.line(ev, "phase "+ph)
		p.lastPhase = ph
	}
	if prev == nil || op == nil {
		return
	}
	if d := labelDiff(prev.Labels, op.Labels); d != "" {
		p.line(ev, "labels: "+d)
	}
	if prev.LogLevel != op.LogLevel {
		p.line(ev, "log level: "+prev.LogLevel+" → "+op.LogLevel)
	}
}

// settled describes a node_end: its outcome, how long it ran (when this
// watch saw it begin live) and, for a success, its verdict and output.
func (p *eventPrinter) settled(label string, e protocol.WatchEvent) string {
	o := decodeOutcome(e.Outcome)
	s := "(" + o.Status
	switch {
	case o.Status == "":
		s = "(unknown outcome"
	case o.Status == "error":
		s += ": " + o.Code
		if o.Reason != "" {
			s += ", " + o.Reason
		}
	case len(o.Signals) > 0:
		for _, k := range slices.Sorted(maps.Keys(o.Signals)) {
			s += ", " + k + "=" + o.Signals[k]
		}
	}
	s += ")"
	key := label + "\x00" + strconv.FormatInt(e.Node.Attempt, 10)
	if t, ok := p.begun[key]; ok {
		early := p.early[key]
		delete(p.begun, key)
		delete(p.early, key)
		switch {
		case !early:
			s += " after " + roundDuration(time.Now().Sub(t))
		case p.live:
			s += " after more than " + roundDuration(time.Now().Sub(t)) + " (it began before this watch)"
		}
	}
	if len(o.Output) > 0 && string(o.Output) != "null" {
		s += ": " + truncate(string(o.Output))
	}
	return s
}

// roundDuration shows a duration to the millisecond under a second, else
// to the tenth of a second.
func roundDuration(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// truncate shortens s to maxShown characters.
func truncate(s string) string {
	r := []rune(s)
	if len(r) <= maxShown {
		return s
	}
	return string(r[:maxShown-1]) + "…"
}

// labelDiff says what changed between two label maps: "set a=b, c=d;
// removed e" ("" when nothing did).
func labelDiff(old, cur map[string]string) string {
	var set, removed []string
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if v, ok := old[k]; !ok || v != cur[k] {
			set = append(set, k+"="+cur[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[k]; !ok {
			removed = append(removed, k)
		}
	}
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "set "+strings.Join(set, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed "+strings.Join(removed, ", "))
	}
	return strings.Join(parts, "; ")
}

func attemptNote(n int64) string {
	if n > 1 {
		return " [attempt " + strconv.FormatInt(n, 10) + "]"
	}
	return ""
}

// streamLine writes one streamed line (logs) after the local time unless
// --timestamps=false.
func (c *cli) streamLine(w io.Writer, s string) { c.stampedLine(w, s, false) }

// replayedStamp stands in the time column for a line replayed from the
// run's history: the protocol records no time, and the time it was printed
// would be wrong.
const replayedStamp = "--:--:--"

// stampedLine is streamLine for a line that may come from the run's
// history (replayed): that one gets replayedStamp instead of a time.
func (c *cli) stampedLine(w io.Writer, s string, replayed bool) {
	switch {
	case !c.timestamps:
	case replayed:
		s = replayedStamp + " " + s
	default:
		s = time.Now().Format("15:04:05") + " " + s
	}
	fmt.Fprintln(w, s)
}
