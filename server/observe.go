package server

import (
	"time"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/protocol"
)

// Observation and limits: two consumer-side ports through which a host
// sees and bounds what connections do, without this package knowing
// about metrics, logs or quotas. Both are optional (nil: nothing is
// observed, nothing is limited) and both are called on the request path,
// so implementations must not block and should cost no more than a few
// atomic operations per call: every label a metric needs is resolved
// before the first request (methods are indexes, codes a small enum).

// MethodOther is the method index of a request whose method is unknown
// (or absent); every other index is a position in protocol.Registry.
const MethodOther = -1

// MethodIndex returns m's index in protocol.Registry (MethodOther for nil).
// It compares pointers, with no hashing or allocation.
func MethodIndex(m *protocol.MethodInfo) int {
	if m != nil {
		for i := range protocol.Registry {
			if &protocol.Registry[i] == m {
				return i
			}
		}
	}
	return MethodOther
}

// Observer sees the connections of a server. Open is called once when a
// connection starts serving; the ConnObserver it returns receives that
// connection's events until Closed.
type Observer interface {
	Open(c ConnInfo) ConnObserver
}

// ConnInfo describes a connection when it opens.
type ConnInfo struct {
	// Binding is the transport's name ("websocket", "ndjson").
	Binding string
	// Peer is the remote address, when the binding has one.
	Peer     string
	Identity identity.ConnectionIdentity
}

// ConnObserver receives one connection's events. Calls may come from any
// of the connection's goroutines, concurrently.
type ConnObserver interface {
	// Request is one answered request (subscriptions: their
	// establishment).
	Request(r RequestInfo)
	// Refused is one request refused at admission, before any handler.
	Refused(r Refusal)
	// Cancel is one $/cancelRequest; effective when it cancelled a
	// request in flight.
	Cancel(effective bool)
	// Subscribed and Unsubscribed bracket a live subscription of method.
	Subscribed(method int)
	Unsubscribed(method int)
	// Delivered is one event notification written for method.
	Delivered(method int)
	// SlowConsumer is one subscription closed with SLOW_CONSUMER.
	SlowConsumer(method int)
	// Closed is the connection's end.
	Closed(s ConnStats)
}

// RequestInfo is one answered request. Params and Answer are the raw
// request params and answer frame: an observer may read ids from them
// and must not keep them.
type RequestInfo struct {
	Method   int
	Code     Code
	Duration time.Duration
	Params   []byte
	Answer   []byte
}

// Refusal says why admission refused a request.
type Refusal int

const (
	// RefusedBusy: every task slot was taken (SERVER_BUSY).
	RefusedBusy Refusal = iota
	// RefusedDuplicate: the id was in flight (DUPLICATE_REQUEST_ID).
	RefusedDuplicate
	// RefusedRate: the tenant's request rate was exceeded (SERVER_BUSY).
	RefusedRate
	// RefusedSubscriptions: the tenant's subscription quota was reached
	// (SERVER_BUSY).
	RefusedSubscriptions
)

// Refusals names every Refusal, by value.
var Refusals = [...]string{"busy", "duplicate_id", "tenant_rate", "tenant_subscriptions"}

// ConnStats is a connection's account when it ends.
type ConnStats struct {
	Duration  time.Duration
	FramesIn  int64
	FramesOut int64
	Reason    CloseReason
	Expired   bool
}

// String names a close reason for logs and metrics.
func (r CloseReason) String() string {
	switch r {
	case CloseGoingAway:
		return "going_away"
	case CloseExpired:
		return "expired"
	case CloseStalled:
		return "stalled"
	case CloseInternal:
		return "internal"
	}
	return "normal"
}

// Limits are a host's admission quotas. Open admits a new connection of
// id, or refuses it (its principal has too many open connections); the
// ConnLimits it returns bound that connection's requests and
// subscriptions by its tenant's quotas until Close.
type Limits interface {
	Open(id identity.ConnectionIdentity) (ConnLimits, bool)
}

// ConnLimits bound one connection.
type ConnLimits interface {
	// Allow takes one request from the tenant's rate; false refuses it.
	Allow() bool
	// OpenSubscription reserves one of the tenant's subscriptions; false
	// refuses it. Each reservation is given back by CloseSubscription.
	OpenSubscription() bool
	CloseSubscription()
	// Close ends the connection's share of its principal's connections.
	Close()
}

// Code is the result of an answered request: CodeOK or an error code.
type Code uint8

// Result codes: ok, each data code of the catalogue, then the bare
// JSON-RPC codes of errors without one.
const (
	CodeOK Code = iota
	CodeUnsupportedVersion
	CodeSchemaViolation
	CodeGraphInvalid
	CodeGenerationConflict
	CodeRunConflict
	CodeIdempotencyReuse
	CodeInvalidPhase
	CodeCancelled
	CodeNotFound
	CodeGone
	CodeNoRetryableFrontier
	CodeServerBusy
	CodeDuplicateRequestID
	CodeInternal
	CodeSlowConsumer
	CodeStoreUnavailable
	CodeParseError
	CodeInvalidRequest
	CodeMethodNotFound
	CodeInvalidParams
	CodeOtherError
	numCodes
)

// Codes names every Code, by value: "ok", the data codes as on the wire,
// and the JSON-RPC errors in upper snake case.
var Codes = [numCodes]string{
	"ok", protocol.UnsupportedProtocolVersion, protocol.SchemaViolation, protocol.GraphInvalid,
	protocol.GenerationConflict, protocol.RunConflict, protocol.IdempotencyReuse, protocol.InvalidPhase,
	protocol.Cancelled, protocol.NotFound, protocol.Gone, protocol.NoRetryableFrontier, protocol.ServerBusy,
	protocol.DuplicateRequestID, protocol.InternalErrorCode, protocol.SlowConsumer, "STORE_UNAVAILABLE",
	"PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS", "OTHER_ERROR",
}

// AnswerCode reads the result code of an answer frame written by
// protocol.ResultFrame or protocol.ErrorFrame: it skips the id and the
// message and reads the error's data code, or its JSON-RPC code when it
// has none. It allocates nothing.
func AnswerCode(frame []byte) Code {
	const head = `{"jsonrpc":"2.0","id":`
	if !hasPrefix(frame, head) {
		return CodeOtherError
	}
	rest := skipValue(frame[len(head):])
	if hasPrefix(rest, `,"result":`) {
		return CodeOK
	}
	const errHead = `,"error":{"code":`
	if !hasPrefix(rest, errHead) {
		return CodeOtherError
	}
	rest = rest[len(errHead):]
	n := 0
	for n < len(rest) && (rest[n] == '-' || rest[n] >= '0' && rest[n] <= '9') {
		n++
	}
	num := rest[:n]
	rest = rest[n:]
	if hasPrefix(rest, `,"message":`) {
		rest = skipValue(rest[len(`,"message":`):])
	}
	const dataHead = `,"data":{"code":"`
	if hasPrefix(rest, dataHead) {
		rest = rest[len(dataHead):]
		for i, b := range rest {
			if b == '"' {
				return dataCode(rest[:i])
			}
		}
	}
	switch string(num) {
	case "-32700":
		return CodeParseError
	case "-32600":
		return CodeInvalidRequest
	case "-32601":
		return CodeMethodNotFound
	case "-32602":
		return CodeInvalidParams
	case "-32603":
		return CodeInternal
	}
	return CodeOtherError
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// skipValue skips a JSON string, number or literal at the start of b.
func skipValue(b []byte) []byte {
	if len(b) == 0 || b[0] != '"' {
		for i, c := range b {
			if c == ',' || c == '}' {
				return b[i:]
			}
		}
		return nil
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return b[i+1:]
		}
	}
	return nil
}

func dataCode(b []byte) Code {
	for c := CodeUnsupportedVersion; c <= CodeStoreUnavailable; c++ {
		if string(b) == Codes[c] {
			return c
		}
	}
	return CodeOtherError
}

// Tee is an Observer that reports to each of obs in turn.
func Tee(obs ...Observer) Observer { return tee(obs) }

type tee []Observer

func (t tee) Open(c ConnInfo) ConnObserver {
	cs := make(teeConn, len(t))
	for i, o := range t {
		cs[i] = o.Open(c)
	}
	return cs
}

type teeConn []ConnObserver

func (t teeConn) each(f func(ConnObserver)) {
	for _, o := range t {
		f(o)
	}
}

func (t teeConn) Request(r RequestInfo)   { t.each(func(o ConnObserver) { o.Request(r) }) }
func (t teeConn) Refused(r Refusal)       { t.each(func(o ConnObserver) { o.Refused(r) }) }
func (t teeConn) Cancel(effective bool)   { t.each(func(o ConnObserver) { o.Cancel(effective) }) }
func (t teeConn) Subscribed(method int)   { t.each(func(o ConnObserver) { o.Subscribed(method) }) }
func (t teeConn) Unsubscribed(method int) { t.each(func(o ConnObserver) { o.Unsubscribed(method) }) }
func (t teeConn) Delivered(method int)    { t.each(func(o ConnObserver) { o.Delivered(method) }) }
func (t teeConn) SlowConsumer(method int) { t.each(func(o ConnObserver) { o.SlowConsumer(method) }) }
func (t teeConn) Closed(s ConnStats)      { t.each(func(o ConnObserver) { o.Closed(s) }) }
