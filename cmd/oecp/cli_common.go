package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oecp/oecp/client"
	"github.com/oecp/oecp/graph"
	"github.com/oecp/oecp/protocol"
)

// Defaults of the client subcommands.
const (
	defaultServerURL = "ws://127.0.0.1:7300/oecp"
	// dialTimeout bounds opening one connection (TCP, TLS and upgrade).
	dialTimeout = 15 * time.Second
)

// cli is one client subcommand invocation: its flags, streams and the
// connection it opens.
type cli struct {
	name           string
	fs             *flag.FlagSet
	stdout, stderr io.Writer

	server         string
	tokenFile      string
	caFile         string
	allowPlaintext bool
	jsonOut        bool

	// Mutating commands only.
	idemKey      string
	ifGeneration optInt
	ifRun        optString

	args []string // positional arguments
}

// optInt is an int64 flag that knows whether it was given.
type optInt struct {
	set bool
	v   int64
}

func (o *optInt) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatInt(o.v, 10)
}

func (o *optInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want a generation number (0 or more), got %q", s)
	}
	o.set, o.v = true, v
	return nil
}

type optString struct {
	set bool
	v   string
}

func (o *optString) String() string     { return o.v }
func (o *optString) Set(s string) error { o.set, o.v = true, s; return nil }

const casHelp = "When --if-generation / --if-run are absent, the command first reads them with `get`: " +
	"convenient, not atomic (a change between the read and the request is not detected). " +
	"Pass them explicitly to pin the state you checked."

// newCLI prepares a subcommand. mutating adds --idempotency-key and, with
// cas, --if-generation/--if-run.
func newCLI(name, synopsis, about string, stdout, stderr io.Writer, mutating, runCAS bool) *cli {
	c := &cli{name: name, stdout: stdout, stderr: stderr}
	c.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	c.fs.SetOutput(stderr)
	def := os.Getenv("OECP_SERVER")
	if def == "" {
		def = defaultServerURL
	}
	c.fs.StringVar(&c.server, "server", def, "server URL, ws:// or wss:// (env OECP_SERVER)")
	c.fs.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token (else env OECP_TOKEN)")
	c.fs.StringVar(&c.caFile, "ca-file", "", "PEM file of extra CA certificates to trust for wss://")
	c.fs.BoolVar(&c.allowPlaintext, "allow-plaintext", false, "allow ws:// to a non-loopback host (traffic and token in clear)")
	c.fs.BoolVar(&c.jsonOut, "json", false, "print the method's JSON result instead of text")
	if mutating {
		c.fs.StringVar(&c.idemKey, "idempotency-key", "", "idempotency key of the request (default: a fresh random key)")
		c.fs.Var(&c.ifGeneration, "if-generation", "expected cluster generation (default: read with get first)")
		if runCAS {
			c.fs.Var(&c.ifRun, "if-run", "expected current run id (default: read with get first)")
		}
	}
	c.fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: oecp %s\n\n%s\n", synopsis, about)
		if mutating {
			fmt.Fprintf(stderr, "\n%s\n", casHelp)
		}
		fmt.Fprintln(stderr, "\nflags:")
		c.fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nExit status: 0 success; 1 the server answered with an error, or the run failed or was stopped;\n2 usage error, unreadable file, refused URL, connection failure or authentication failure.")
	}
	return c
}

// parse parses flags and positional arguments in any order. It returns an
// exit code and false when the command should stop.
func (c *cli) parse(args []string, minPos, maxPos int) (int, bool) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK, false
			}
			return exitUsage, false
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			c.args = append(c.args, args[1:]...)
			break
		}
		c.args = append(c.args, args[0])
		args = args[1:]
	}
	if len(c.args) < minPos || len(c.args) > maxPos {
		if len(c.args) > maxPos {
			c.errorf("unexpected argument %q; see 'oecp %s --help'", c.args[maxPos], c.name)
		} else {
			c.errorf("missing argument; see 'oecp %s --help'", c.name)
		}
		return exitUsage, false
	}
	return exitOK, true
}

func (c *cli) errorf(format string, a ...any) {
	fmt.Fprintf(c.stderr, "oecp %s: %s\n", c.name, fmt.Sprintf(format, a...))
}

// usageErr reports a usage problem and returns exitUsage.
func (c *cli) usageErr(format string, a ...any) int {
	c.errorf(format, a...)
	return exitUsage
}

// dialOptions builds the dialing options from flags and environment.
func (c *cli) dialOptions() (client.DialOptions, error) {
	var o client.DialOptions
	u, err := url.Parse(c.server)
	if err != nil {
		return o, fmt.Errorf("%w: --server %q is not a URL", client.ErrURLRefused, c.server)
	}
	o.AllowPlaintext = c.allowPlaintext || client.IsLoopbackHost(u.Host)
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return o, fmt.Errorf("read --token-file: %w", err)
		}
		o.Token = strings.TrimSpace(string(b))
		if o.Token == "" {
			return o, fmt.Errorf("--token-file %s is empty", c.tokenFile)
		}
	} else {
		o.Token = strings.TrimSpace(os.Getenv("OECP_TOKEN"))
	}
	if c.caFile != "" {
		o.CAFiles = []string{c.caFile}
	}
	return o, nil
}

// localError marks a problem found before talking to the server (exit 2).
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// dialer returns the command's connection factory.
func (c *cli) dialer() (client.Dialer, error) {
	opts, err := c.dialOptions()
	if err != nil {
		return nil, &localError{err}
	}
	if _, err := client.CheckURL(c.server, opts.AllowPlaintext); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*client.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		defer cancel()
		return client.Dial(dctx, c.server, opts)
	}, nil
}

// connect opens the command's connection.
func (c *cli) connect(ctx context.Context) (*client.Conn, client.Dialer, error) {
	dial, err := c.dialer()
	if err != nil {
		return nil, nil, err
	}
	conn, err := dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	return conn, dial, nil
}

// signalContext ends on SIGINT/SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// session is a command's open connection and the context it runs in
// (ended by SIGINT/SIGTERM).
type session struct {
	*cli
	ctx  context.Context
	conn *client.Conn
	dial client.Dialer
	stop context.CancelFunc
}

// open starts the command's signal context and connects. When ok the
// caller defers s.close(); otherwise the failure is reported and code is
// the exit status.
func (c *cli) open() (s *session, code int, ok bool) {
	ctx, stop := signalContext()
	conn, dial, err := c.connect(ctx)
	if err != nil {
		code = c.fail(err)
		stop()
		return nil, code, false
	}
	return &session{cli: c, ctx: ctx, conn: conn, dial: dial, stop: stop}, exitOK, true
}

// openCAS opens a session for a mutating command and reads its
// preconditions (see readCAS).
func (c *cli) openCAS(needGet bool) (s *session, st casState, code int, ok bool) {
	if s, code, ok = c.open(); !ok {
		return nil, st, code, false
	}
	st, err := c.readCAS(s.ctx, s.conn, needGet)
	if err != nil {
		code = c.fail(err)
		s.close()
		return nil, st, code, false
	}
	return s, st, exitOK, true
}

// start parses a command without positional arguments and opens its
// session.
func (c *cli) start(args []string) (s *session, code int, ok bool) {
	if code, ok = c.parse(args, 0, 0); !ok {
		return nil, code, false
	}
	return c.open()
}

// startCAS is start for a mutating command that reads its preconditions.
func (c *cli) startCAS(args []string) (s *session, st casState, code int, ok bool) {
	if code, ok = c.parse(args, 0, 0); !ok {
		return nil, st, code, false
	}
	return c.openCAS(false)
}

// close closes the connection, then ends the signal context.
func (s *session) close() {
	s.conn.Close()
	s.stop()
}

// call sends method and decodes its result into r, returning the raw
// result too.
func (s *session) call(method string, params, r any) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := s.conn.Call(s.ctx, method, params, &raw); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, err
	}
	return raw, nil
}

// result sends method and decodes its result into r for printing as text.
// It returns done when the command is over: the call failed (reported;
// code is the exit status), or --json printed the raw result.
func (s *session) result(method string, params, r any) (code int, done bool) {
	var raw json.RawMessage
	if err := s.conn.Call(s.ctx, method, params, &raw); err != nil {
		return s.fail(err), true
	}
	if s.jsonOut {
		s.printJSON(raw)
		return exitOK, true
	}
	if err := json.Unmarshal(raw, r); err != nil {
		return s.fail(err), true
	}
	return exitOK, false
}

// fail reports err with what to do next and returns the exit code.
// failGraph is fail for plan and apply: the protocol answers an
// undecodable graph with a bare SCHEMA_VIOLATION, so the CLI decodes the
// file with the same strict decoder to say where the problem is.
func (c *cli) failGraph(err error, file string, data []byte) int {
	code := c.fail(err)
	var se *client.Error
	if errors.As(err, &se) && se.DataCode == protocol.SchemaViolation && len(se.Details) == 0 {
		if _, derr := graph.Decode(data); derr != nil {
			fmt.Fprintf(c.stderr, "  %s: %v\n", file, derr)
		}
	}
	return code
}

func (c *cli) fail(err error) int {
	var se *client.Error
	switch {
	case errors.As(err, &se):
		c.errorf("the server refused the request: %s", describeServerError(se))
		if hint := serverHint(c.name, se); hint != "" {
			fmt.Fprintf(c.stderr, "  %s\n", hint)
		}
		return exitError
	case errors.Is(err, client.ErrURLRefused):
		c.errorf("%v", err)
		fmt.Fprintf(c.stderr, "  Use a ws:// or wss:// URL with a host and no credentials, query or fragment (e.g. %s);\n  plaintext ws:// to a non-loopback host needs --allow-plaintext.\n", defaultServerURL)
		return exitUsage
	case errors.Is(err, client.ErrUnauthorized):
		c.errorf("%v", err)
		fmt.Fprintln(c.stderr, "  Check the token given with --token-file or OECP_TOKEN: it may be missing, unknown to the server, or expired.")
		return exitUsage
	case errors.Is(err, context.Canceled):
		c.errorf("interrupted")
		return exitError
	}
	var le *localError
	if errors.As(err, &le) {
		c.errorf("%v", err)
		return exitUsage
	}
	c.errorf("cannot talk to the server at %s: %v", c.server, err)
	fmt.Fprintln(c.stderr, "  Is `oecp serve` running there? Start it, or point --server / OECP_SERVER at the right URL.")
	return exitUsage
}

func describeServerError(e *client.Error) string {
	s := e.Message
	if e.DataCode != "" {
		s += " (" + e.DataCode + ")"
	} else {
		s += fmt.Sprintf(" (code %d)", e.Code)
	}
	var reason string
	if e.Detail("reason", &reason) {
		s += ": " + reason
	} else if len(e.Details) > 0 && string(e.Details) != "null" && e.DataCode != protocol.GraphInvalid {
		s += " " + string(e.Details)
	}
	return s
}

// serverHint says what to do next after a server error.
func serverHint(cmd string, e *client.Error) string {
	switch e.DataCode {
	case protocol.GenerationConflict:
		var g any
		e.Detail("currentGeneration", &g)
		return fmt.Sprintf("The cluster is at generation %v, not the one sent: check `oecp get` and retry (or pass --if-generation).", jsonString(g))
	case protocol.RunConflict:
		var r any
		e.Detail("currentRunId", &r)
		return fmt.Sprintf("The current run is %v, not the one sent: check `oecp get` and retry (or pass --if-run).", jsonString(r))
	case protocol.InvalidPhase:
		var phase, dispatch string
		e.Detail("currentPhase", &phase)
		e.Detail("dispatchState", &dispatch)
		switch {
		case phase == protocol.PhaseFinished && cmd == "apply":
			return "The cluster's run has finished: `oecp delete` it before applying a graph, or `oecp resubmit` to run the same graph again."
		case phase == protocol.PhaseRunning && cmd == "apply":
			return "A run is in progress: a changed graph is accepted only while the run is held on a failure; `oecp stop` it (or wait for it to finish, then `oecp delete`)."
		case phase == protocol.PhaseEmpty:
			return "The cluster is empty (see `oecp get`): `oecp apply -f GRAPH --input JSON` starts a run."
		case dispatch == protocol.DispatchSuspended:
			return "The run is suspended: `oecp update --resume` first."
		}
		return "The cluster's current state does not allow " + cmd + " now: see `oecp get`."
	case protocol.IdempotencyReuse:
		return "This --idempotency-key was already used for a different request: use a new key (or omit it)."
	case protocol.GraphInvalid:
		var diags []json.RawMessage
		e.Detail("diagnostics", &diags)
		var b strings.Builder
		for _, d := range diags {
			b.WriteString(formatDiagnostic(d))
			b.WriteString("\n  ")
		}
		return b.String() + "Fix the graph; `oecp plan -f FILE` shows these diagnostics without applying."
	case protocol.SchemaViolation:
		return "The request does not fit the protocol schema: check the graph file, --input and the flags."
	case protocol.NotFound:
		return "Nothing with that id exists: check the run id or execution with `oecp get` / `oecp watch`."
	case protocol.Gone:
		return "It was deleted or is no longer active."
	case protocol.NoRetryableFrontier:
		return "There is no failed step to retry now (see the reason above; `oecp watch` shows the run's events)."
	case protocol.ServerBusy:
		return "The server is at its per-connection limit: try again shortly."
	case protocol.Cancelled:
		return "The request was cancelled before it committed: retry it with the same --idempotency-key."
	}
	if e.Code == protocol.CodeInternalError {
		return "The server failed internally: check its log."
	}
	return ""
}

func jsonString(v any) string {
	if v == nil {
		return "none"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// formatDiagnostic renders a GraphDiagnostic on one line.
func formatDiagnostic(raw json.RawMessage) string {
	var d struct {
		Severity string `json:"severity"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		Path     []struct {
			Kind  string `json:"kind"`
			Name  string `json:"name"`
			Index *int64 `json:"index"`
		} `json:"path"`
		RelatedNodes []string `json:"relatedNodes"`
	}
	if json.Unmarshal(raw, &d) != nil || d.Message == "" {
		return string(raw)
	}
	var path strings.Builder
	for _, p := range d.Path {
		switch {
		case p.Index != nil:
			fmt.Fprintf(&path, "[%d]", *p.Index)
		case p.Kind == "node":
			fmt.Fprintf(&path, "<%s>", p.Name)
		default:
			if path.Len() > 0 {
				path.WriteByte('.')
			}
			path.WriteString(p.Name)
		}
	}
	s := fmt.Sprintf("%s %s", d.Severity, d.Code)
	if path.Len() > 0 {
		s += " at " + path.String()
	}
	s += ": " + d.Message
	if len(d.RelatedNodes) > 0 {
		s += " (nodes: " + strings.Join(d.RelatedNodes, ", ") + ")"
	}
	return s
}

// readGraph reads a graph file as raw JSON ("-" is stdin).
func readGraph(path string) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read graph: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("graph file %s is not valid JSON", path)
	}
	return json.RawMessage(b), nil
}

// parseJSONArg reads a JSON value given on the command line, or from a
// file with @FILE.
func parseJSONArg(flagName, v string) (json.RawMessage, error) {
	b := []byte(v)
	if strings.HasPrefix(v, "@") {
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, fmt.Errorf("read %s: %w", flagName, err)
		}
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s %q is not valid JSON (give a JSON value such as null, 42, \"text\" or {\"k\":1}, or @FILE)", flagName, v)
	}
	return json.RawMessage(b), nil
}

// printJSON writes one raw JSON value on its own line.
func (c *cli) printJSON(raw json.RawMessage) {
	fmt.Fprintf(c.stdout, "%s\n", raw)
}

// casState is what a mutating command reads with get when the caller did
// not pin it.
type casState struct {
	generation int64
	runID      string // "" when there is no current run
	status     protocol.ClusterStatus
}

// readCAS fills the generation / run preconditions: flags win, else get.
func (c *cli) readCAS(ctx context.Context, conn *client.Conn, needGet bool) (casState, error) {
	var s casState
	if !c.ifGeneration.set || !c.ifRun.set || needGet {
		g, err := conn.Get(ctx, client.GetParams{})
		if err != nil {
			return s, err
		}
		s.status = g.Status
		if g.Status.ObservedGeneration != nil {
			s.generation = *g.Status.ObservedGeneration
		}
		if g.Status.CurrentRunID != nil {
			s.runID = *g.Status.CurrentRunID
		}
	}
	if c.ifGeneration.set {
		s.generation = c.ifGeneration.v
	}
	if c.ifRun.set {
		s.runID = c.ifRun.v
	}
	return s, nil
}

func dedupNote(deduped bool) string {
	if deduped {
		return " (replayed: this idempotency key was already used for the same request)"
	}
	return ""
}

func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

func intOr(p *int64, def string) string {
	if p == nil {
		return def
	}
	return strconv.FormatInt(*p, 10)
}
