package export

import "bytes"

// splitter splits a byte stream that comes in chunks into lines, without
// their newline, the same however it was cut. It keeps at most max bytes
// of the line in progress: a longer line ends cut to them and marked
// tooLong.
type splitter struct {
	max     int
	buf     []byte
	tooLong bool
}

// feed takes the next chunk and calls end with each line it completes;
// the line's bytes are end's only until it returns.
func (l *splitter) feed(b []byte, end func(line []byte, tooLong bool)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.add(b)
			return
		}
		l.add(b[:i])
		l.end(end)
		b = b[i+1:]
	}
}

func (l *splitter) add(b []byte) {
	if room := l.max - len(l.buf); len(b) > room {
		b, l.tooLong = b[:room], true
	}
	l.buf = append(l.buf, b...)
}

// end ends the line in progress, as far as it came.
func (l *splitter) end(end func(line []byte, tooLong bool)) {
	line, tooLong := l.buf, l.tooLong
	l.buf, l.tooLong = l.buf[:0], false
	end(line, tooLong)
}

// footerStart is how a footer line starts (Footer's first member).
var footerStart = []byte(`{"record":"footer"`)

// Tail is a writer an export's bytes pass through on their way to where
// they go; Ended says whether the export ended with its footer line (a
// stream cut short does not). It keeps only the start of a line.
type Tail struct {
	lines splitter
	last  []byte
}

// NewTail returns a Tail that has seen nothing.
func NewTail() *Tail { return &Tail{lines: splitter{max: len(footerStart)}} }

func (t *Tail) Write(p []byte) (int, error) {
	t.lines.feed(p, func(line []byte, _ bool) { t.last = append(t.last[:0], line...) })
	return len(p), nil
}

// Ended reports whether what was written ends with a footer line and its
// newline.
func (t *Tail) Ended() bool {
	return len(t.lines.buf) == 0 && bytes.HasPrefix(t.last, footerStart)
}
