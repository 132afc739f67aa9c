// Package ndjson is the NDJSON binding of the OECP connection core: one
// JSON-RPC object per '\n'-terminated line on a byte stream (stdin/stdout
// for `oecp serve --stdio`), diagnostics on a separate stream. It knows
// framing only — line bounds, CR stripping, UTF-8, EOF — and nothing of
// methods.
package ndjson

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// Diagnostics written to the diagnostics stream: the one terminal line of
// an expired identity, and the prefix of an input error.
const (
	DiagExpired    = "cluster protocol connection identity expired\n"
	diagInputError = "cluster protocol input error: "
)

// ErrInvalidUTF8 ends the connection when a line is not UTF-8.
var ErrInvalidUTF8 = errors.New("stream did not contain valid UTF-8")

// Transport frames a connection as NDJSON. ReadFrame is for one reader;
// WriteFrame and Flush share one buffer and must not overlap (the
// connection core calls them only from the holder of its write role);
// Close is safe from any goroutine.
type Transport struct {
	in   io.Reader
	r    *bufio.Reader
	w    *bufio.Writer
	diag io.Writer

	line []byte // the last frame read, reused by the next ReadFrame

	diagMu sync.Mutex
	closed bool
}

// New returns a transport reading requests from in, writing frames to out
// and diagnostics to diag.
func New(in io.Reader, out io.Writer, diag io.Writer) *Transport {
	return &Transport{
		in:   in,
		r:    bufio.NewReaderSize(in, 64<<10),
		w:    bufio.NewWriterSize(out, 64<<10),
		diag: diag,
	}
}

func (t *Transport) diagnose(msg string) {
	t.diagMu.Lock()
	defer t.diagMu.Unlock()
	_, _ = io.WriteString(t.diag, msg)
}

func (t *Transport) isClosed() bool {
	t.diagMu.Lock()
	defer t.diagMu.Unlock()
	return t.closed
}

// ReadFrame returns the next line without its terminator (a CR before the
// LF is stripped and counts toward the limit). An over-long line is
// discarded up to its newline and reported as server.ErrFrameTooLarge.
// The frame is valid until the next call.
func (t *Transport) ReadFrame() ([]byte, error) {
	line := t.line[:0]
	defer func() { t.line = line[:0] }()
	tooLong := false
	for {
		chunk, err := t.r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > protocol.MaxFrameBytes+2 {
				tooLong = true
				line = line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && (len(line) > 0 || tooLong) {
				break // a final line without newline still counts
			}
			if !errors.Is(err, io.EOF) && !t.isClosed() {
				t.diagnose(diagInputError + err.Error() + "\n")
			}
			return nil, err
		}
		break
	}
	if tooLong {
		return nil, server.ErrFrameTooLarge
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if len(line) > protocol.MaxFrameBytes {
		return nil, server.ErrFrameTooLarge
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if !utf8.Valid(line) {
		t.diagnose(diagInputError + ErrInvalidUTF8.Error() + "\n")
		return nil, ErrInvalidUTF8
	}
	return line, nil
}

// WriteFrame buffers one line.
func (t *Transport) WriteFrame(b []byte) error {
	if _, err := t.w.Write(b); err != nil {
		return err
	}
	return t.w.WriteByte('\n')
}

// Flush writes buffered lines out.
func (t *Transport) Flush() error { return t.w.Flush() }

// Close ends the connection: on expiry it writes the one terminal
// diagnostic. The input is closed when it can be, to unblock the reader.
func (t *Transport) Close(reason server.CloseReason) error {
	t.diagMu.Lock()
	if t.closed {
		t.diagMu.Unlock()
		return nil
	}
	t.closed = true
	t.diagMu.Unlock()
	if reason == server.CloseExpired {
		t.diagnose(DiagExpired)
	}
	if c, ok := t.in.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Serve runs one NDJSON connection until EOF, expiry or shutdown.
func Serve(shutdown context.Context, d *server.Dispatcher, in io.Reader, out, diag io.Writer, id identity.ConnectionIdentity, opts server.Options) error {
	if id.ExpiredAt(nowOf(opts)) {
		_, err := io.WriteString(diag, DiagExpired)
		return err
	}
	if opts.Binding == "" {
		opts.Binding = "ndjson"
	}
	c := server.NewConn(d, New(in, out, diag), id, opts)
	served := make(chan struct{})
	go func() {
		defer close(served)
		c.Serve(shutdown)
	}()
	select {
	case <-served:
	case <-c.Done():
		// Closed by shutdown or expiry: a blocking stdin read may never
		// return, so the reader is abandoned after a short bound.
		bound := time.NewTimer(time.Second)
		defer bound.Stop()
		select {
		case <-served:
		case <-bound.C:
		}
	}
	return nil
}

func nowOf(o server.Options) time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// String describes the transport for logs.
func (t *Transport) String() string { return fmt.Sprintf("ndjson(%T)", t.in) }
