package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	ws "github.com/coder/websocket"
)

// MaxFrameBytes bounds one inbound frame (a WebSocket message or an NDJSON
// line). The server bounds what it reads at 1 MiB, but what it writes can
// be a little larger (a get echoing a near-limit graph with its status), so
// the client accepts more.
const MaxFrameBytes = 4 << 20

// Transport carries whole JSON-RPC frames. ReadFrame is called by one
// goroutine only; WriteFrame is serialised by the Conn; Close may be called
// concurrently with both and must unblock ReadFrame.
type Transport interface {
	ReadFrame() ([]byte, error)
	WriteFrame(b []byte) error
	Close() error
}

// wsTransport is the WebSocket binding: one text message per frame. It
// never passes a per-request context to Read or Write, because cancelling
// that context would close the whole connection.
type wsTransport struct {
	c *ws.Conn
}

func (t *wsTransport) ReadFrame() ([]byte, error) {
	typ, b, err := t.c.Read(context.Background())
	if err != nil {
		return nil, wsReadError(err)
	}
	if typ != ws.MessageText {
		_ = t.c.Close(ws.StatusUnsupportedData, "binary frames are not supported")
		return nil, errors.New("server sent a binary WebSocket message")
	}
	return b, nil
}

// wsReadError classifies the error that ended the WebSocket connection.
func wsReadError(err error) error {
	switch code := ws.CloseStatus(err); code {
	case -1:
		return err
	case 4401:
		return fmt.Errorf("%w: the server closed the connection (4401 connection identity expired)", ErrUnauthorized)
	case ws.StatusNormalClosure:
		return fmt.Errorf("%w: the server closed the connection normally", ErrClosed)
	case ws.StatusGoingAway:
		return fmt.Errorf("%w: the server is shutting down (1001)", ErrClosed)
	default:
		var ce ws.CloseError
		errors.As(err, &ce)
		return fmt.Errorf("%w: the server closed the connection (%d %s)", ErrClosed, int(code), ce.Reason)
	}
}

func (t *wsTransport) WriteFrame(b []byte) error {
	return t.c.Write(context.Background(), ws.MessageText, b)
}

func (t *wsTransport) Close() error {
	err := t.c.Close(ws.StatusNormalClosure, "")
	if err != nil {
		_ = t.c.CloseNow()
	}
	return nil
}

// ndjsonTransport frames a byte stream as newline-delimited JSON.
type ndjsonTransport struct {
	r      *bufio.Reader
	w      io.Writer
	closer func() error
	once   sync.Once
	err    error
}

// NewNDJSON returns a transport that reads frames from r and writes them
// to w, one JSON object per '\n'-terminated line; closer (may be nil) is
// called once by Close and must unblock a pending read of r.
func NewNDJSON(r io.Reader, w io.Writer, closer func() error) Transport {
	return &ndjsonTransport{r: bufio.NewReaderSize(r, 64<<10), w: w, closer: closer}
}

// NDJSON adapts an io.ReadWriteCloser (a socket, a pipe pair) to the NDJSON
// binding.
func NDJSON(rwc io.ReadWriteCloser) Transport { return NewNDJSON(rwc, rwc, rwc.Close) }

func (t *ndjsonTransport) ReadFrame() ([]byte, error) {
	var line []byte
	for {
		chunk, err := t.r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxFrameBytes+2 {
			return nil, fmt.Errorf("server sent a line longer than %d bytes", MaxFrameBytes)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				break
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				return nil, fmt.Errorf("%w: the server ended the stream", ErrClosed)
			}
			return nil, err
		}
		break
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, nil
}

func (t *ndjsonTransport) WriteFrame(b []byte) error {
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	_, err := t.w.Write(buf)
	return err
}

func (t *ndjsonTransport) Close() error {
	t.once.Do(func() {
		if t.closer != nil {
			t.err = t.closer()
		}
	})
	return t.err
}

// commandExitGrace is how long Close waits for a spawned server to exit
// after its stdin was closed before killing it.
const commandExitGrace = 5 * time.Second

// CommandTransport runs a command that speaks NDJSON on its stdin/stdout,
// such as `oecp serve --stdio`. Its stderr goes to the writer given to
// StartCommand.
type CommandTransport struct {
	Transport
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{}
	once sync.Once
}

// StartCommand starts cmd (not yet started; its Stdin and Stdout must be
// unset) and returns the transport over its stdin/stdout. stderr receives
// the command's diagnostics (nil discards them).
func StartCommand(cmd *exec.Cmd, stderr io.Writer) (*CommandTransport, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if stderr == nil {
		stderr = io.Discard
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	t := &CommandTransport{cmd: cmd, in: in, done: make(chan struct{})}
	t.Transport = NewNDJSON(out, in, t.stop)
	go func() {
		_ = cmd.Wait() // closes stdout after the process exits
		close(t.done)
	}()
	return t, nil
}

// stop closes the command's stdin (the server shuts down on EOF) and kills
// it if it has not exited within commandExitGrace.
func (t *CommandTransport) stop() error {
	_ = t.in.Close()
	select {
	case <-t.done:
	case <-time.After(commandExitGrace):
		_ = t.cmd.Process.Kill()
		<-t.done
	}
	return nil
}

// Exited is closed when the command has exited.
func (t *CommandTransport) Exited() <-chan struct{} { return t.done }
