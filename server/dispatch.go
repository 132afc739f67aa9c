package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/oecp/oecp/protocol"
)

// Dispatcher routes decoded requests to a Backend through the method
// table, with one error precedence for every method: params shape, method
// lookup, typed decoding, method checks, fault delay, backend call, result
// encoding. It is safe for concurrent use and holds no per-connection
// state.
type Dispatcher struct {
	Backend Backend
	Log     *slog.Logger
	// FaultDelay delays a method's handler by the given duration, honouring
	// cancellation (--fault-delay; an aid for client authors and tests).
	FaultDelay map[string]time.Duration
	// InlineReads lets initialize and get run on the connection's reader
	// goroutine. Set it only for a backend whose Initialize and Get never
	// block (the cluster backend: one store snapshot read); a backend that
	// may wait there would stall its connection's reader.
	InlineReads bool
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// isObject reports whether raw params are a JSON object.
func isObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}

func decodeReason(err error) string {
	s := err.Error()
	return strings.TrimPrefix(s, protocol.ErrDecode.Error()+": ")
}

// delay waits out a configured fault delay; false means ctx ended first.
func (d *Dispatcher) delay(ctx context.Context, method string) bool {
	dur, ok := d.FaultDelay[method]
	if !ok || dur <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Inline reports whether a method runs on the connection's reader
// goroutine: with InlineReads, initialize and get (read-only snapshots)
// are answered in place, which saves two goroutine hand-offs per request.
// A configured fault delay (which must stay cancellable) sends them to
// their own goroutine like every other method.
func (d *Dispatcher) Inline(method string) bool {
	if !d.InlineReads {
		return false
	}
	switch method {
	case protocol.MethodInitialize, protocol.MethodGet:
		return d.FaultDelay[method] <= 0
	}
	return false
}

// errorResponse maps a backend error to its wire form.
func (d *Dispatcher) errorResponse(id protocol.ID, method string, err error) []byte {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		if pe.Code == protocol.CodeInternalError {
			// Redaction: internal errors never carry details or messages.
			d.logger().Warn("backend internal error", "method", method, "code", pe.DataCode)
			return protocol.ErrorFrame(id, protocol.Internal(pe.DataCode))
		}
		if pe.DataCode == "" && pe.Code == protocol.CodeApplication {
			cp := *pe
			cp.DataCode = protocol.InternalErrorCode
			return protocol.ErrorFrame(id, &cp)
		}
		return protocol.ErrorFrame(id, pe)
	}
	d.logger().Error("backend failure", "method", method, "err", err)
	return protocol.ErrorFrame(id, protocol.Internal(""))
}

// resultResponse encodes a success result, or -32603 when it cannot be. A
// result that carries its encoding is written as is.
func (d *Dispatcher) resultResponse(id protocol.ID, method string, result any) []byte {
	if e, ok := result.(protocol.Encoded); ok {
		if b := e.EncodedJSON(); b != nil {
			return protocol.ResultFrame(id, b)
		}
	}
	b, err := protocol.Marshal(result)
	if err != nil {
		d.logger().Error("result encoding failed", "method", method, "err", err)
		return protocol.ErrorFrame(id, protocol.Internal(""))
	}
	return protocol.ResultFrame(id, b)
}

// Unary handles a unary method and returns the response frame. It returns
// nil when ctx was cancelled before an answer existed.
func (d *Dispatcher) Unary(ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) []byte {
	if !isObject(params) {
		return protocol.ErrorFrame(id, protocol.InvalidParams())
	}
	h, ok := unaryMethods[m.Name]
	if !ok {
		// Subscription methods never reach unary dispatch.
		return protocol.MethodNotFoundFrame(id)
	}
	return h(d, ctx, m, id, params)
}

// respond is the answer to a unary call: nil when ctx ended before it
// existed, else the error or the result frame.
func (d *Dispatcher) respond(ctx context.Context, id protocol.ID, method string, result any, err error) []byte {
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return d.errorResponse(id, method, err)
	}
	return d.resultResponse(id, method, result)
}

// Subscribe establishes a subscription. On failure it returns the error
// response frame instead; both are nil when ctx ended before the backend
// was called.
func (d *Dispatcher) Subscribe(ctx context.Context, m *protocol.MethodInfo, id protocol.ID, params json.RawMessage) (*Subscription, []byte) {
	if !isObject(params) {
		// Non-object params of a subscription are SCHEMA_VIOLATION, not
		// the bare Invalid params of unary methods.
		return nil, protocol.ErrorFrame(id, protocol.SchemaError())
	}
	h, ok := subscribeMethods[m.Name]
	if !ok {
		return nil, protocol.MethodNotFoundFrame(id)
	}
	return h(d, ctx, m, id, params)
}

// established checks what a backend returned for a subscription.
func (d *Dispatcher) established(id protocol.ID, method string, sub *Subscription, err error) (*Subscription, []byte) {
	if err != nil {
		return nil, d.errorResponse(id, method, err)
	}
	if sub == nil || sub.Stream == nil {
		d.logger().Error("backend returned an empty subscription", "method", method)
		return nil, protocol.ErrorFrame(id, protocol.Internal(""))
	}
	return sub, nil
}
