package evidence

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"

	"github.com/oecp/oecp/redact"
	"github.com/oecp/oecp/runs/export"
)

// execTap is the worker.Tap of one execution: each process it sees is the
// next turn.
type execTap struct {
	r   *Recorder
	key execKey
	red redactor

	mu   sync.Mutex
	turn int
}

// Started records the process's prompt: its standard input, or its last
// argument when it was given no input.
func (t *execTap) Started(argv []string, stdin []byte) (func(string, []byte), func()) {
	t.mu.Lock()
	turn := t.turn
	t.turn++
	t.mu.Unlock()
	via, prompt := "stdin", stdin
	if len(stdin) == 0 {
		via, prompt = "argv", nil
		if len(argv) > 1 {
			prompt = []byte(argv[len(argv)-1])
		}
	}
	data, _ := t.red.redact(prompt, true)
	t.r.add(t.key, evRecord(t.key.execution, turn, evPrompt, via, data))
	p := &procTap{t: t, turn: turn, streams: map[string]*streamTap{evStdout: {kind: evStdout}, evStderr: {kind: evStderr}}}
	return p.raw, p.end
}

// procTap is one process's streams.
type procTap struct {
	t       *execTap
	turn    int
	streams map[string]*streamTap
}

// streamTap is one stream of a process. Each stream is read by one
// goroutine, so it needs no lock of its own.
type streamTap struct {
	kind      string
	held      []byte // the tail a declared value may still continue
	seen      int64  // raw bytes taken, up to maxStream
	recorded  int64  // bytes recorded (after redaction)
	truncated bool
}

func (p *procTap) raw(stream string, b []byte) {
	s := p.streams[stream]
	if s == nil {
		return
	}
	if room := maxStream - s.seen; int64(len(b)) > room {
		b, s.truncated = b[:max(room, 0)], true
	}
	s.seen += int64(len(b))
	if len(b) == 0 {
		return
	}
	p.emit(s, append(s.held, b...), false)
}

func (p *procTap) emit(s *streamTap, buf []byte, final bool) {
	out, held := p.t.red.redact(buf, final)
	s.held = held
	if len(out) == 0 {
		return
	}
	p.t.r.add(p.t.key, evRecord(p.t.key.execution, p.turn, s.kind, itoa(s.recorded), out))
	s.recorded += int64(len(out))
}

// end flushes what each stream held back and closes the process's
// evidence.
func (p *procTap) end() {
	out, errs := p.streams[evStdout], p.streams[evStderr]
	for _, s := range []*streamTap{out, errs} {
		if len(s.held) > 0 {
			p.emit(s, s.held, true)
		}
	}
	data, _ := json.Marshal(export.End{Stdout: out.recorded, Stderr: errs.recorded, StdoutTruncated: out.truncated, StderrTruncated: errs.truncated})
	p.t.r.add(p.t.key, evRecord(p.t.key.execution, p.turn, evEnd, "", data))
}

// redactor replaces values (the spellings of the declared values), longest
// first, in a stream that arrives in pieces: a tail that may be the start
// of a value is held back until the next piece (or the end) decides, so
// the tail held is at most the longest spelling less one byte. byFirst
// indexes the values by their first byte, longest first, so a byte no
// value starts with costs one lookup however many spellings there are.
type redactor struct {
	values  [][]byte
	byFirst *[256][][]byte
}

func newRedactor(values [][]byte) redactor {
	sort.SliceStable(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	r := redactor{values: values, byFirst: new([256][][]byte)}
	for _, v := range values {
		if len(v) > 0 {
			r.byFirst[v[0]] = append(r.byFirst[v[0]], v)
		}
	}
	return r
}

// redact returns buf with every declared value replaced by redact.Marker,
// and the tail to hold back (none when final).
func (r redactor) redact(buf []byte, final bool) (out, held []byte) {
	if len(r.values) == 0 {
		return bytes.Clone(buf), nil
	}
	start := 0
	for i := 0; i < len(buf); {
		if len(r.byFirst[buf[i]]) == 0 {
			i++
			continue
		}
		n, partial := r.matchAt(buf[i:], final)
		if partial {
			return append(out, buf[start:i]...), bytes.Clone(buf[i:])
		}
		if n == 0 {
			i++
			continue
		}
		out = append(append(out, buf[start:i]...), redact.Marker...)
		i += n
		start = i
	}
	return append(out, buf[start:]...), nil
}

// matchAt is the length of the value rest starts with (0: none), or
// partial when rest is a proper prefix of a value and more may come.
func (r redactor) matchAt(rest []byte, final bool) (n int, partial bool) {
	for _, v := range r.byFirst[rest[0]] {
		if bytes.HasPrefix(rest, v) {
			return len(v), false
		}
		if !final && len(rest) < len(v) && bytes.HasPrefix(v, rest) {
			return 0, true
		}
	}
	return 0, false
}
