package server

import (
	"context"
	"encoding/json"

	"github.com/oecp/oecp/protocol"
)

// The method table. A method is served by one line here: its decoder and
// the Backend method (a method expression) joined by a generic adapter,
// which keeps the error precedence of every method the same.

// unaryHandler serves one unary method once its params are known to be an
// object; it returns nil when ctx ended before an answer existed.
type unaryHandler func(d *Dispatcher, ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) []byte

// subscribeHandler establishes one subscription kind once its params are
// known to be an object; see Dispatcher.Subscribe.
type subscribeHandler func(d *Dispatcher, ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) (*Subscription, []byte)

var unaryMethods = map[string]unaryHandler{
	protocol.MethodInitialize:   (*Dispatcher).initialize,
	protocol.MethodGet:          unary(protocol.DecodeGet, Backend.Get),
	protocol.MethodPlan:         unary(protocol.DecodePlan, Backend.Plan),
	protocol.MethodApply:        unary(protocol.DecodeApply, Backend.Apply),
	protocol.MethodUpdate:       unary(protocol.DecodeUpdate, Backend.Update),
	protocol.MethodStop:         unary(protocol.DecodeStop, Backend.Stop),
	protocol.MethodRetry:        unary(protocol.DecodeRetry, Backend.Retry),
	protocol.MethodResubmit:     unary(protocol.DecodeResubmit, Backend.Resubmit),
	protocol.MethodDelete:       unary(protocol.DecodeDelete, Backend.Delete),
	protocol.MethodRunSubmit:    runUnary(protocol.MethodRunSubmit),
	protocol.MethodRunList:      runUnary(protocol.MethodRunList),
	protocol.MethodRunStatus:    runUnary(protocol.MethodRunStatus),
	protocol.MethodRunForce:     runUnary(protocol.MethodRunForce),
	protocol.MethodRunHarnesses: runUnary(protocol.MethodRunHarnesses),
}

var subscribeMethods = map[string]subscribeHandler{
	protocol.MethodWatch:       subscribe(protocol.DecodeWatch, Backend.Watch),
	protocol.MethodLogs:        subscribe(protocol.DecodeLogs, Backend.Logs),
	protocol.MethodAgentAttach: subscribe(protocol.DecodeAgentAttach, Backend.AgentAttach),
	protocol.MethodRunWatch:    runSubscribe(protocol.MethodRunWatch),
	protocol.MethodRunLogs:     runSubscribe(protocol.MethodRunLogs),
	protocol.MethodRunAttach:   runSubscribe(protocol.MethodRunAttach),
}

// unary joins a decoder and a Backend method into a unary handler.
func unary[P, R any](decode func(json.RawMessage) (P, error), call func(Backend, context.Context, P) (R, error)) unaryHandler {
	return func(d *Dispatcher, ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) []byte {
		p, refusal, ok := prepare(d, ctx, m, id, params, decode)
		if !ok {
			return refusal
		}
		result, err := call(d.Backend, ctx, p)
		return d.respond(ctx, id, m.Name, result, err)
	}
}

// subscribe joins a decoder and a Backend method into a subscription
// handler.
func subscribe[P any](decode func(json.RawMessage) (P, error), call func(Backend, context.Context, P) (*Subscription, error)) subscribeHandler {
	return func(d *Dispatcher, ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) (*Subscription, []byte) {
		p, refusal, ok := prepare(d, ctx, m, id, params, decode)
		if !ok {
			return nil, refusal
		}
		sub, err := call(d.Backend, ctx, p)
		return d.established(id, m.Name, sub, err)
	}
}

// prepare decodes params and waits out a configured fault delay. When ok
// is false the call goes no further: refusal is the answer to params that
// do not decode, or nil when ctx ended first.
func prepare[P any](d *Dispatcher, ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage, decode func(json.RawMessage) (P, error)) (p P, refusal []byte, ok bool) {
	p, err := decode(params)
	if err != nil {
		return p, protocol.ErrorFrame(id, m.DecodeError(decodeReason(err))), false
	}
	return p, nil, d.delay(ctx, m.Name)
}

// runUnary serves a native-v2 unary method through Backend.RunUnary.
func runUnary(method string) unaryHandler {
	return unary(
		func(raw json.RawMessage) (protocol.RunParams, error) { return protocol.DecodeRun(method, raw) },
		func(b Backend, ctx context.Context, p protocol.RunParams) (any, error) {
			return b.RunUnary(ctx, method, p)
		})
}

// runSubscribe serves a native-v2 subscription through
// Backend.RunSubscribe.
func runSubscribe(method string) subscribeHandler {
	return subscribe(
		func(raw json.RawMessage) (protocol.RunParams, error) { return protocol.DecodeRun(method, raw) },
		func(b Backend, ctx context.Context, p protocol.RunParams) (*Subscription, error) {
			return b.RunSubscribe(ctx, method, p)
		})
}

// initialize checks the requested protocol version after decoding and
// before the fault delay, and refuses a backend that answers with another
// version.
func (d *Dispatcher) initialize(ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) []byte {
	p, err := protocol.DecodeInitialize(params)
	if err != nil {
		return protocol.ErrorFrame(id, m.DecodeError(decodeReason(err)))
	}
	if p.ProtocolVersion != protocol.Version {
		return protocol.ErrorFrame(id, protocol.AppError(protocol.UnsupportedProtocolVersion, protocol.MsgUnsupportedVer,
			map[string]any{"requestedProtocolVersion": p.ProtocolVersion, "supportedProtocolVersion": protocol.Version}))
	}
	if !d.delay(ctx, m.Name) {
		return nil
	}
	r, err := d.Backend.Initialize(ctx)
	if err == nil && r.ProtocolVersion != protocol.Version {
		return protocol.ErrorFrame(id, protocol.Internal(""))
	}
	return d.respond(ctx, id, m.Name, r, err)
}
