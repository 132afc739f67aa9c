// Package wiretest is the in-house harness for wire-level tests: it parses
// golden transcripts and runs a server.Backend behind each real binding —
// an in-process NDJSON pipe, a loopback WebSocket server, and a real
// `oecp serve --stdio` child process — behind one small Wire interface,
// and builds the oecp binary for black-box tests. It is for tests only.
package wiretest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/internal/testkit"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/ndjson"
	"github.com/oecp/oecp/transport/websocket"
)

// Wire is one client connection to a server under test.
type Wire interface {
	// Send writes one frame.
	Send(frame string) error
	// Recv reads the next frame; it fails once the connection has ended.
	Recv() (string, error)
	// CloseSend ends the client's side (NDJSON EOF, WebSocket close) and
	// returns every frame the server still wrote before it finished.
	CloseSend() ([]string, error)
}

// Pair is one request line and the response line that must follow it.
type Pair struct {
	Request  string
	Response string
}

// PackDir returns the path of the conformance pack kept in the repository
// (testdata/oecp-v1).
func PackDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "oecp-v1")
}

// GoldenPath returns the path of a golden transcript.
func GoldenPath(name string) string {
	return filepath.Join(PackDir(), "goldens", name)
}

// ParseGolden reads an .ndjson golden: request and response lines alternate.
func ParseGolden(path string) ([]Pair, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines)%2 != 0 {
		return nil, fmt.Errorf("%s: odd number of lines", path)
	}
	pairs := make([]Pair, 0, len(lines)/2)
	for i := 0; i < len(lines); i += 2 {
		pairs = append(pairs, Pair{Request: lines[i], Response: lines[i+1]})
	}
	return pairs, nil
}

// Replay sends each request and requires the exact response bytes.
func Replay(t testing.TB, w Wire, pairs []Pair) {
	t.Helper()
	for i, p := range pairs {
		if err := w.Send(p.Request); err != nil {
			t.Fatalf("pair %d: send: %v", i, err)
		}
		got, err := w.Recv()
		if err != nil {
			t.Fatalf("pair %d: recv: %v", i, err)
		}
		if got != p.Response {
			t.Fatalf("pair %d: request %s\n got: %s\nwant: %s", i, p.Request, got, p.Response)
		}
	}
}

// Options configure a harness server.
type Options struct {
	Identity identity.ConnectionIdentity
	Resolver identity.Resolver
	Server   server.Options
	// FaultDelay is passed to the dispatcher.
	FaultDelay map[string]time.Duration
	// InlineReads is passed to the dispatcher.
	InlineReads bool
}

// ---- in-process NDJSON pipe ----

// lineWire is the client side of an NDJSON connection: one frame a line.
type lineWire struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// Send writes one line.
func (l *lineWire) Send(frame string) error {
	_, err := io.WriteString(l.in, frame+"\n")
	return err
}

// Recv reads one line.
func (l *lineWire) Recv() (string, error) {
	line, err := l.out.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// closeSend closes the input and returns the lines read until the output
// ends.
func (l *lineWire) closeSend() []string {
	_ = l.in.Close()
	var rest []string
	for {
		line, err := l.Recv()
		if err != nil {
			return rest
		}
		rest = append(rest, line)
	}
}

// PipeWire is an in-process NDJSON connection.
type PipeWire struct {
	lineWire
	outR *io.PipeReader
	diag *testkit.SyncBuffer
	done chan struct{}
	Conn *server.Conn
}

// NewPipe serves b over an in-process NDJSON pipe until CloseSend.
func NewPipe(t testing.TB, b server.Backend, o Options) *PipeWire {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &PipeWire{lineWire: lineWire{in: inW, out: bufio.NewReaderSize(outR, 1<<21)}, outR: outR, diag: testkit.NewSyncBuffer(), done: make(chan struct{})}
	id := o.Identity
	if id.Principal == "" {
		id = identity.Local()
	}
	d := &server.Dispatcher{Backend: b, FaultDelay: o.FaultDelay, InlineReads: o.InlineReads}
	p.Conn = server.NewConn(d, ndjson.New(inR, outW, p.diag), id, o.Server)
	go func() {
		defer close(p.done)
		p.Conn.Serve(context.Background())
		_ = outW.Close()
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		<-p.done
	})
	return p
}

// CloseSend closes stdin and collects the remaining output.
func (p *PipeWire) CloseSend() ([]string, error) {
	rest := p.closeSend()
	<-p.done
	return rest, nil
}

// Diagnostics returns what the server wrote to its diagnostics stream.
func (p *PipeWire) Diagnostics() string { return p.diag.String() }

// Done is closed when the server side has finished.
func (p *PipeWire) Done() <-chan struct{} { return p.done }

// ---- loopback WebSocket ----

// WSServer is a loopback WebSocket server for one backend.
type WSServer struct {
	URL     string
	Handler *websocket.Handler
	srv     *httptest.Server
}

// NewWSServer listens on 127.0.0.1:0 and serves b at /oecp.
func NewWSServer(t testing.TB, b server.Backend, o Options) *WSServer {
	t.Helper()
	h := &websocket.Handler{
		Dispatcher: &server.Dispatcher{Backend: b, FaultDelay: o.FaultDelay, InlineReads: o.InlineReads},
		Resolver:   o.Resolver,
		Options:    o.Server,
	}
	mux := http.NewServeMux()
	mux.Handle("/oecp", h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	s := &WSServer{URL: "ws://" + ln.Addr().String() + "/oecp", Handler: h, srv: srv}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		h.Wait()
	})
	return s
}

// WSWire is a raw WebSocket client connection.
type WSWire struct {
	C *ws.Conn
}

// Dial connects to the server with optional headers.
func (s *WSServer) Dial(t testing.TB, header http.Header) *WSWire {
	t.Helper()
	c, resp, err := ws.Dial(context.Background(), s.URL, &ws.DialOptions{HTTPHeader: header})
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", s.URL, err, code)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { _ = c.CloseNow() })
	return &WSWire{C: c}
}

// Send writes one text message.
func (w *WSWire) Send(frame string) error {
	return w.C.Write(context.Background(), ws.MessageText, []byte(frame))
}

// SendBinary writes one binary message.
func (w *WSWire) SendBinary(b []byte) error {
	return w.C.Write(context.Background(), ws.MessageBinary, b)
}

// Recv reads one message.
func (w *WSWire) Recv() (string, error) {
	typ, b, err := w.C.Read(context.Background())
	if err != nil {
		return "", err
	}
	if typ != ws.MessageText {
		return "", errors.New("binary message from server")
	}
	return string(b), nil
}

// CloseSend closes the connection normally. The server's remaining frames
// are not collected on WebSocket (the close handshake discards them).
func (w *WSWire) CloseSend() ([]string, error) {
	return nil, w.C.Close(ws.StatusNormalClosure, "")
}

// ---- oecp serve --stdio child process ----

// ProcWire is a real `oecp serve --stdio` child process.
type ProcWire struct {
	lineWire
	cmd    *exec.Cmd
	Stderr *testkit.SyncBuffer
}

// BuildBinary builds cmd/oecp into dir and returns its path.
func BuildBinary(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "oecp")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/oecp")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// RunWithBinary is a TestMain body for tests of the built binary: it
// builds cmd/oecp into a temporary directory, sets *bin to its path, runs
// the tests and removes the directory. It returns m.Run's exit code, or 2
// when the build fails.
func RunWithBinary(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "oecp-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(dir)
	if *bin, err = BuildBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return m.Run()
}

// MainWithBinary is the TestMain of a package that tests the built
// binary: RunWithBinary, failing the tests when any of them leaves a
// goroutine running.
func MainWithBinary(m *testing.M, bin *string) { testkit.Main(withBinary{m, bin}) }

// withBinary runs the tests with *bin built.
type withBinary struct {
	*testing.M
	bin *string
}

func (w withBinary) Run() int { return RunWithBinary(w.M, w.bin) }

// StartProc runs `bin serve --stdio args...`.
func StartProc(t testing.TB, bin string, args ...string) *ProcWire {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--stdio"}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &ProcWire{lineWire: lineWire{in: in, out: bufio.NewReaderSize(out, 1<<21)}, cmd: cmd, Stderr: testkit.NewSyncBuffer()}
	cmd.Stderr = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// CloseSend closes stdin, collects the remaining output and waits for exit.
func (p *ProcWire) CloseSend() ([]string, error) {
	rest := p.closeSend()
	return rest, p.cmd.Wait()
}

// Server is an `oecp serve` child process listening on 127.0.0.1:0.
type Server struct {
	Cmd  *exec.Cmd
	URL  string
	done chan error
}

var servingURL = regexp.MustCompile(`url=(ws://127\.0\.0\.1:\d+/oecp)`)

// StartServer runs `bin serve --listen 127.0.0.1:0 args...`, waits for the
// line that names its URL, and kills it when t ends. Its stderr after that
// line is copied to log (nil discards it).
func StartServer(t testing.TB, bin string, log io.Writer, args ...string) *Server {
	t.Helper()
	return StartServerEnv(t, bin, log, nil, args...)
}

// StartServerEnv is StartServer with env added to the test's environment
// (a later entry for a name wins).
func StartServerEnv(t testing.TB, bin string, log io.Writer, env []string, args ...string) *Server {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Server{Cmd: cmd, done: make(chan error, 1)}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := servingURL.FindStringSubmatch(sc.Text()); m != nil {
			p.URL = m[1]
			break
		}
	}
	if p.URL == "" {
		_ = cmd.Process.Kill()
		t.Fatalf("oecp serve did not report its URL: %v", cmd.Wait())
	}
	if log == nil {
		log = io.Discard
	}
	go func() {
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// Signal sends sig to the server and waits for it to exit, returning how
// it exited.
func (p *Server) Signal(t testing.TB, sig os.Signal) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	p.done <- err // let Cleanup's receive return
	return err
}
