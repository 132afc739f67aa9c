package export

import (
	"bytes"
	"encoding/json"
	"io"
	"unicode/utf8"
)

// Bounds of the semantic view.
const (
	// MaxText bounds every text a semantic event carries (text, thinking,
	// tool output, result); a longer one is cut on a UTF-8 boundary and
	// marked "truncated".
	MaxText = 16 << 10
	// MaxInput bounds a tool call's input or a usage object, as JSON; a
	// larger one is left out and the event marked "truncated".
	MaxInput = 16 << 10
	// MaxLine bounds one output line the parser keeps while it waits for
	// its end: the drivers' per-process stdout cap. A longer line is
	// unparsed.
	MaxLine = 8 << 20
)

// Event is one semantic event. Type is text, thinking, tool_call,
// tool_result, result or usage; the other fields are those of the type.
type Event struct {
	Type      string          `json:"type"`
	Execution string          `json:"execution"`
	Turn      int             `json:"turn"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Status    string          `json:"status,omitempty"`
	Text      *string         `json:"text,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Output    *string         `json:"output,omitempty"`
	IsError   bool            `json:"isError,omitempty"`
	Usage     json.RawMessage `json:"usage,omitempty"`
	CostUSD   json.RawMessage `json:"costUsd,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// Semantic writes the semantic view.
type Semantic struct {
	lw       *lineWriter
	tracker  *Tracker
	lines    map[procKey]*lineState
	unparsed int
}

// lineState is a process's unfinished stdout line and the parse state of
// its stream.
type lineState struct {
	lines splitter
	p     parser
}

// NewSemantic starts a semantic view of runID on w with its header line.
func NewSemantic(w io.Writer, runID string, traceID ...string) *Semantic {
	s := &Semantic{lw: newLineWriter(w), tracker: NewTracker(), lines: map[procKey]*lineState{}}
	s.lw.write(header{"header", runID, FormatSemantic, Version, first(traceID)})
	return s
}

// Evidence takes one evidence item: stdout is parsed line by line, a
// process's end parses its last line.
func (s *Semantic) Evidence(it Item) {
	s.tracker.See(it)
	k := procKey{it.Execution, it.Turn}
	switch it.Kind {
	case KindStdout:
		st := s.lines[k]
		if st == nil {
			st = &lineState{lines: splitter{max: MaxLine}, p: parser{exec: it.Execution, turn: it.Turn, calls: map[string]bool{}}}
			s.lines[k] = st
		}
		st.lines.feed(it.Data, st.parse(s))
	case KindEnd:
		if st := s.lines[k]; st != nil {
			st.lines.end(st.parse(s))
			delete(s.lines, k)
		}
	}
}

// parse is what parses each line of the process's stdout into s.
func (st *lineState) parse(s *Semantic) func(line []byte, tooLong bool) {
	return func(line []byte, tooLong bool) {
		if tooLong {
			s.unparsed++
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return
		}
		evs, ok := st.p.line(line)
		if !ok {
			s.unparsed++
			return
		}
		for _, e := range evs {
			s.lw.write(e)
		}
	}
}

// Close parses the last line of every process whose end was not seen,
// writes the footer and flushes.
func (s *Semantic) Close(finished bool, agentExecutions []string) error {
	for _, k := range s.tracker.order {
		if st := s.lines[k]; st != nil {
			st.lines.end(st.parse(s))
		}
	}
	missing := s.tracker.Missing(finished, agentExecutions)
	n := s.unparsed
	s.lw.write(Footer{Record: "footer", Complete: len(missing) == 0, Missing: missing, Unparsed: &n})
	return s.lw.flush()
}

// bounded cuts text to MaxText on a UTF-8 boundary.
func bounded(text string) (*string, bool) {
	if len(text) <= MaxText {
		return &text, false
	}
	n := MaxText
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	t := text[:n]
	return &t, true
}

// boundedJSON keeps raw JSON up to MaxInput; larger is left out.
func boundedJSON(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) > MaxInput {
		return nil, true
	}
	var buf bytes.Buffer
	if len(raw) > 0 && json.Compact(&buf, raw) == nil {
		return buf.Bytes(), false
	}
	return raw, false
}
