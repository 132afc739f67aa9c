package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/oecp/oecp/protocol"
)

// Sentinel errors callers branch on.
var (
	// ErrClosed: the connection was closed by Close, or it ended.
	ErrClosed = errors.New("oecp client: connection closed")
	// ErrUnauthorized: the server refused the identity: HTTP 401 on the
	// upgrade, or WebSocket close 4401 (the identity expired).
	ErrUnauthorized = errors.New("oecp client: unauthorized")
	// ErrURLRefused: the URL breaks the dialing rules; no socket was opened.
	ErrURLRefused = errors.New("oecp client: URL refused")
)

// Error is an error answered by the server: a JSON-RPC error object.
type Error struct {
	Code    int    // JSON-RPC code, e.g. -32000
	Message string // error.message
	// DataCode is error.data.code ("" when the error had no data), e.g.
	// GENERATION_CONFLICT.
	DataCode string
	// Details is error.data.details as received (nil when absent).
	Details json.RawMessage
}

func (e *Error) Error() string {
	s := "server error " + strconv.Itoa(e.Code) + ": " + e.Message
	if e.DataCode != "" {
		s += " (" + e.DataCode + ")"
	}
	if len(e.Details) > 0 && string(e.Details) != "null" {
		s += " " + string(e.Details)
	}
	return s
}

// Detail decodes one member of Details into v; it reports whether the
// member was present and decodable.
func (e *Error) Detail(name string, v any) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(e.Details, &m) != nil {
		return false
	}
	raw, ok := m[name]
	return ok && json.Unmarshal(raw, v) == nil
}

// wireError is the JSON shape of an error object.
type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    *struct {
		Code    string          `json:"code"`
		Details json.RawMessage `json:"details"`
	} `json:"data"`
}

func (w *wireError) toError() *Error {
	e := &Error{Code: w.Code, Message: w.Message}
	if w.Data != nil {
		e.DataCode = w.Data.Code
		e.Details = w.Data.Details
	}
	return e
}

// Compacted reports whether err is the server's answer to a watch or logs
// replay from a cursor of a run whose history retention deleted (GONE
// with details.compactedThrough), as opposed to a deleted cluster's run
// (GONE with tombstonedAt) or a cursor that never existed (NOT_FOUND). A
// client recovers by re-reading state, as a Kubernetes client re-lists
// after a 410.
func Compacted(err error) bool {
	var e *Error
	var through string
	return errors.As(err, &e) && e.DataCode == "GONE" && e.Detail("compactedThrough", &through)
}

// ErrorCode returns the data code of a server error in err's chain ("" if
// err is not a server error or has no data code).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.DataCode
	}
	return ""
}

// ClosedError is why a subscription ended when the server closed it
// (subscription/closed) or the client dropped it for not keeping up.
type ClosedError struct {
	SubscriptionID string
	// Reason is "done" or "SLOW_CONSUMER".
	Reason string
	// LastDeliveredCursor is the cursor of the last event delivered on the
	// subscription, when known; resume a watch from it.
	LastDeliveredCursor string
	// Local is true when the client itself dropped the subscription because
	// the consumer did not drain Events fast enough.
	Local bool
}

func (e *ClosedError) Error() string {
	s := fmt.Sprintf("subscription %s closed: %s", e.SubscriptionID, e.Reason)
	if e.Local {
		s += " (the consumer fell behind the client buffer)"
	}
	if e.LastDeliveredCursor != "" {
		s += " after cursor " + e.LastDeliveredCursor
	}
	return s
}

// Done reports whether err is a subscription's end because its stream is
// complete (closed with reason "done"): no failure.
func Done(err error) bool {
	var ce *ClosedError
	return errors.As(err, &ce) && ce.Reason == "done"
}

// MethodNotFound reports whether err is the server's -32601 answer: it
// does not serve the method (a server older than the method).
func MethodNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == protocol.CodeMethodNotFound
}
