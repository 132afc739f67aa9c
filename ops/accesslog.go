package ops

import (
	"bytes"
	"log/slog"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

// AccessLog is a server.Observer that writes one structured line per
// connection when it ends (principal, tenant, remote address, binding,
// duration, frames in and out, close reason) and one per mutation
// (method, tenant, run, outcome, duration). It logs ids only: never a
// token, never any other param value.
type AccessLog struct {
	Log *slog.Logger
}

// mutations are the methods that change state, by index in
// protocol.Registry.
var mutations = func() []bool {
	m := make([]bool, len(protocol.Registry))
	for i, mi := range protocol.Registry {
		switch mi.Name {
		case protocol.MethodApply, protocol.MethodUpdate, protocol.MethodStop, protocol.MethodRetry,
			protocol.MethodResubmit, protocol.MethodDelete, protocol.MethodRunSubmit, protocol.MethodRunForce:
			m[i] = true
		}
	}
	return m
}()

// Open implements server.Observer.
func (a AccessLog) Open(c server.ConnInfo) server.ConnObserver {
	return &connLog{log: a.Log, info: c}
}

type connLog struct {
	log  *slog.Logger
	info server.ConnInfo
}

func (c *connLog) Request(r server.RequestInfo) {
	if r.Method < 0 || !mutations[r.Method] {
		return
	}
	attrs := []any{"method", protocol.Registry[r.Method].Name, "tenant", c.info.Identity.Tenant}
	if run := runID(r.Params); run != "" {
		attrs = append(attrs, "run", run)
	} else if run := runID(r.Answer); run != "" {
		attrs = append(attrs, "run", run)
	}
	attrs = append(attrs, "outcome", server.Codes[r.Code], "duration", r.Duration)
	c.log.Info("mutation", attrs...)
}

func (c *connLog) Closed(s server.ConnStats) {
	c.log.Info("connection",
		"principal", c.info.Identity.Principal, "tenant", c.info.Identity.Tenant,
		"remote", c.info.Peer, "binding", c.info.Binding, "duration", s.Duration,
		"framesIn", s.FramesIn, "framesOut", s.FramesOut, "reason", s.Reason.String())
}

func (c *connLog) Refused(server.Refusal) {}
func (c *connLog) Cancel(bool)            {}
func (c *connLog) Subscribed(int)         {}
func (c *connLog) Unsubscribed(int)       {}
func (c *connLog) Delivered(int)          {}
func (c *connLog) SlowConsumer(int)       {}

// runID reads the first "runId" string member of raw JSON, when it is an
// id (1..128 bytes of letters, digits, '.', '_', '-'), else "".
func runID(raw []byte) string {
	const key, space = `"runId"`, " \t\r\n"
	i := bytes.Index(raw, []byte(key))
	if i < 0 {
		return ""
	}
	rest := bytes.TrimLeft(raw[i+len(key):], space)
	if len(rest) == 0 || rest[0] != ':' {
		return ""
	}
	rest = bytes.TrimLeft(rest[1:], space)
	if len(rest) == 0 || rest[0] != '"' {
		return ""
	}
	rest = rest[1:]
	for n, b := range rest {
		switch {
		case b == '"':
			if n == 0 {
				return ""
			}
			return string(rest[:n])
		case n >= 128 || !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-'):
			return ""
		}
	}
	return ""
}
