package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/oecp/oecp/client"
)

// dialOptions builds the dialing options from flags and environment.
func (c *cli) dialOptions() (client.DialOptions, error) {
	var o client.DialOptions
	if err := c.resolveServer(); err != nil {
		return o, err
	}
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
	o.Traceparent = cliTraceparent()
	return o, nil
}

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

// caught is the number of the signal that interrupted a client command
// (0: none); run exits 128 plus it, as shells do (130 for Ctrl-C).
var caught atomic.Int32

// signalContext ends on SIGINT/SIGTERM, recording the signal in caught.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			if n, ok := s.(syscall.Signal); ok {
				caught.Store(int32(n))
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
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

// open starts the command's signal context and connects. On success the
// caller defers s.close().
func (c *cli) open() (*session, error) {
	ctx, stop := signalContext()
	conn, dial, err := c.connectOrStart(ctx) // local_server.go
	if err != nil {
		stop()
		var x *exitErr
		if errors.As(err, &x) {
			return nil, x
		}
		return nil, c.fail(err)
	}
	return &session{cli: c, ctx: ctx, conn: conn, dial: dial, stop: stop}, nil
}

// openCAS opens a session for a mutating command and reads its
// preconditions (see readCAS).
func (c *cli) openCAS(always bool) (*session, casState, error) {
	s, err := c.open()
	if err != nil {
		return nil, casState{}, err
	}
	st, err := c.readCAS(s.ctx, s.conn, always)
	if err != nil {
		s.close()
		return nil, casState{}, c.fail(err)
	}
	return s, st, nil
}

// start parses a command without positional arguments and opens its
// session.
func (c *cli) start(args []string) (*session, error) {
	if err := c.parse(args, 0, 0); err != nil {
		return nil, err
	}
	return c.open()
}

// mutate runs a mutating command without positional arguments: it parses
// args, reads the preconditions, sends method with the params built from
// them and decodes the result into r. done is as for result.
func (c *cli) mutate(args []string, method string, params func(casState) any, r any) (done bool, err error) {
	if err := c.parse(args, 0, 0); err != nil {
		return true, err
	}
	s, st, err := c.openCAS(false)
	if err != nil {
		return true, err
	}
	defer s.close()
	return s.result(method, params(st), r)
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
// done reports that the command is over: the call failed (err says how),
// or --json (-o json|yaml) printed the raw result.
func (s *session) result(method string, params, r any) (done bool, err error) {
	var raw json.RawMessage
	if err := s.conn.Call(s.ctx, method, params, &raw); err != nil {
		return true, s.fail(err)
	}
	if s.machine() {
		s.printRaw(raw)
		return true, nil
	}
	if err := json.Unmarshal(raw, r); err != nil {
		return true, s.fail(err)
	}
	return false, nil
}
