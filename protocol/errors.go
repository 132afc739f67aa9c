package protocol

import (
	"strconv"
)

// JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	CodeApplication    = -32000
)

// Domain codes carried in error.data.code.
const (
	UnsupportedProtocolVersion = "UNSUPPORTED_PROTOCOL_VERSION"
	SchemaViolation            = "SCHEMA_VIOLATION"
	GraphInvalid               = "GRAPH_INVALID"
	GenerationConflict         = "GENERATION_CONFLICT"
	RunConflict                = "RUN_CONFLICT"
	IdempotencyReuse           = "IDEMPOTENCY_REUSE"
	InvalidPhase               = "INVALID_PHASE"
	Cancelled                  = "CANCELLED"
	NotFound                   = "NOT_FOUND"
	Gone                       = "GONE"
	NoRetryableFrontier        = "NO_RETRYABLE_FRONTIER"
	ServerBusy                 = "SERVER_BUSY"
	DuplicateRequestID         = "DUPLICATE_REQUEST_ID"
	InternalErrorCode          = "INTERNAL_ERROR"
	SlowConsumer               = "SLOW_CONSUMER"
	// StoreUnavailable is the data.code of the -32603 error answered when
	// the store cannot serve a request now (store.ErrUnavailable): nothing
	// of the request was committed, and it may succeed once an operator
	// fixes the storage.
	StoreUnavailable = "STORE_UNAVAILABLE"
)

// Fixed messages of the catalogue.
const (
	MsgParseError        = "Parse error"
	MsgInvalidRequest    = "Invalid Request"
	MsgMethodNotFound    = "Method not found"
	MsgInvalidParams     = "Invalid params"
	MsgInternalError     = "Internal error"
	MsgServerBusy        = "Server busy"
	MsgUnsupportedVer    = "Unsupported protocol version"
	MsgInvalidPhase      = "Cluster phase does not admit apply"
	MsgDispatchDenied    = "Lifecycle state denies successor dispatch"
	MsgCursorUnavailable = "Requested cursor is not available"
	MsgGraphInvalid      = "Graph verification failed"
	MsgGenerationCAS     = "Generation precondition failed"
	MsgRunCAS            = "Run precondition failed"
	MsgIdempotencyReuse  = "Idempotency key was reused with different parameters"
	MsgCancelled         = "Admission cancelled before commit"
	MsgRunNotFound       = "Run does not exist"
	MsgRunGone           = "Run history was deleted"
	MsgExecNotFound      = "execution not found"
	MsgExecGone          = "execution is no longer active"
	MsgNoFrontier        = "No retryable failed frontier"
)

// Error is a JSON-RPC error object. It doubles as the Go error a backend
// returns: the dispatcher writes it as is, except that -32603 errors lose
// their details (an internal error never shows its cause to the peer).
type Error struct {
	Code    int
	Message string
	// DataCode is error.data.code; empty means no data member.
	DataCode string
	// Details is error.data.details, already normalised; nil means omitted.
	Details Value
}

func (e *Error) Error() string {
	s := "oecp: " + strconv.Itoa(e.Code) + " " + e.Message
	if e.DataCode != "" {
		s += " (" + e.DataCode + ")"
	}
	return s
}

// AppendJSON appends the error object.
func (e *Error) AppendJSON(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, e.Message)
	if e.DataCode != "" {
		b = append(b, `,"data":{"code":`...)
		b = AppendString(b, e.DataCode)
		if e.Details != nil {
			b = append(b, `,"details":`...)
			b = append(b, e.Details...)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// NewError builds an error whose details (any JSON-marshalable value, or
// nil) are normalised with sorted keys, as the reference echoes them.
func NewError(code int, message, dataCode string, details any) *Error {
	e := &Error{Code: code, Message: message, DataCode: dataCode}
	if details != nil {
		switch d := details.(type) {
		case Value:
			e.Details = d
		default:
			raw, err := Marshal(details)
			if err == nil {
				e.Details, err = NormalizeValue(raw)
			}
			if err != nil {
				return &Error{Code: CodeInternalError, Message: MsgInternalError, DataCode: InternalErrorCode}
			}
		}
	}
	return e
}

// AppError is a -32000 application error.
func AppError(dataCode, message string, details any) *Error {
	return NewError(CodeApplication, message, dataCode, details)
}

// InvalidParams is a -32602 error with no data.
func InvalidParams() *Error { return &Error{Code: CodeInvalidParams, Message: MsgInvalidParams} }

// SchemaError is -32602 SCHEMA_VIOLATION, without details.
func SchemaError() *Error {
	return &Error{Code: CodeInvalidParams, Message: MsgInvalidParams, DataCode: SchemaViolation}
}

// SchemaReason is -32602 SCHEMA_VIOLATION with details {reason}.
func SchemaReason(reason string) *Error {
	return NewError(CodeInvalidParams, MsgInvalidParams, SchemaViolation, map[string]any{"reason": reason})
}

// Internal is a -32603 error with the given data code (never details).
func Internal(dataCode string) *Error {
	if dataCode == "" {
		dataCode = InternalErrorCode
	}
	return &Error{Code: CodeInternalError, Message: MsgInternalError, DataCode: dataCode}
}

// PhaseError is INVALID_PHASE {currentPhase}.
func PhaseError(phase string) *Error {
	return AppError(InvalidPhase, MsgInvalidPhase, map[string]any{"currentPhase": phase})
}

// Unsupported is INVALID_PHASE "Backend does not support <what>", no details.
func Unsupported(what string) *Error {
	return AppError(InvalidPhase, "Backend does not support "+what, nil)
}

// Pre-encoded frames for the errors the connection core sends with id null.
var (
	ParseErrorFrame     = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
	InvalidRequestFrame = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`)
	// FallbackErrorFrame is sent when a response cannot be serialised at all.
	FallbackErrorFrame = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error","data":{"code":"INTERNAL_ERROR","details":null}}}`)
)

// ResultFrame encodes a success response around an encoded result.
func ResultFrame(id ID, result []byte) []byte {
	b := make([]byte, 0, len(result)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = id.AppendJSON(b)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// ErrorFrame encodes an error response for id.
func ErrorFrame(id ID, e *Error) []byte {
	b := make([]byte, 0, 96)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = id.AppendJSON(b)
	b = append(b, `,"error":`...)
	b = e.AppendJSON(b)
	return append(b, '}')
}

// DuplicateIDFrame is the -32600 DUPLICATE_REQUEST_ID answer for id.
func DuplicateIDFrame(id ID) []byte {
	return ErrorFrame(id, &Error{Code: CodeInvalidRequest, Message: MsgInvalidRequest, DataCode: DuplicateRequestID})
}

// ServerBusyFrame is the -32000 SERVER_BUSY answer for id.
func ServerBusyFrame(id ID) []byte {
	return ErrorFrame(id, &Error{Code: CodeApplication, Message: MsgServerBusy, DataCode: ServerBusy})
}

// MethodNotFoundFrame is the -32601 answer for id.
func MethodNotFoundFrame(id ID) []byte {
	return ErrorFrame(id, &Error{Code: CodeMethodNotFound, Message: MsgMethodNotFound})
}

// NotificationFrame wraps encoded params in a server notification.
func NotificationFrame(method string, params []byte) []byte {
	b := make([]byte, 0, len(params)+48)
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = AppendString(b, method)
	b = append(b, `,"params":`...)
	b = append(b, params...)
	return append(b, '}')
}
