// Package protocol holds the OECP v1 wire contract: JSON-RPC envelopes and
// request ids with the exact order of inbound frame checks (envelope.go), the
// error catalogue (errors.go), the method registry (methods.go), strictly
// decoded closed params (params.go, over the reader in object.go), result
// and event types (results.go), the lexical rules shared with the graph
// contract (lexical.go: control characters, BoundedString256), and a JSON
// writer that reproduces the reference implementation's bytes (writer.go:
// compact, no HTML escaping, U+2028/U+2029 raw, sorted keys for free-form
// values, Rust-style floats).
//
// It knows nothing about connections, transports or backends, and imports no
// other package of this module; it is pure data in, data out, and safe for
// concurrent use.
package protocol

// Version is the only protocol version this implementation speaks.
const Version = "openengine.cluster/v1"

// JSONRPCVersion is the required value of the envelope's "jsonrpc" member.
const JSONRPCVersion = "2.0"

// Graph profiles a backend may advertise in initialize, in canonical order.
const (
	ProfileFull         = "openengine.graph.full/v1"
	ProfileSingleWorker = "openengine.graph.single-worker/v1"
)

// Limits of the wire contract.
const (
	// MaxFrameBytes bounds one inbound frame: an NDJSON line without its
	// newline, or one reassembled WebSocket text message. Exactly this many
	// bytes is accepted.
	MaxFrameBytes = 1 << 20
	// MaxConnectionTasks bounds concurrently admitted requests plus live
	// subscriptions plus transient id-less error frames on one connection.
	MaxConnectionTasks = 256
	// OutboundQueueCapacity bounds queued outbound frames per connection.
	OutboundQueueCapacity = 256
	// SubscriptionQueueCapacity is the undelivered backlog at which one
	// subscription is closed with SLOW_CONSUMER.
	SubscriptionQueueCapacity = 1024
	// ReplayPageSize is how many history records a watch replays per page.
	ReplayPageSize = 256
	// MaxSafeInteger is 2^53-1, the bound of generations and positive ints.
	MaxSafeInteger = 9007199254740991
	// MaxBoundedString is the character bound of BoundedString256 values.
	MaxBoundedString = 256
	// MaxLabels bounds the entries of an update's labels map.
	MaxLabels = 64
	// MaxExecutionRefBytes bounds an ExecutionRef in UTF-8 bytes.
	MaxExecutionRefBytes = 128
	// MaxLogTargetBytes bounds a log record's target.
	MaxLogTargetBytes = 128
	// MaxLogMessageBytes bounds a log message; longer ones are redacted.
	MaxLogMessageBytes = 16384
	// MaxAttachOutputBytes bounds agent/attach output text.
	MaxAttachOutputBytes = 16384
	// MaxNotificationBytes bounds one encoded logs or agent/attach event.
	MaxNotificationBytes = 65536
	// MaxFaultSourceFrames bounds BackendFault.source.
	MaxFaultSourceFrames = 8
	// MaxFaultEncodedBytes bounds one encoded BackendFault.
	MaxFaultEncodedBytes = 2048
)

// Redaction markers that replace over-long log messages and attach output.
const (
	RedactedLogMessage   = "<redacted: message exceeded bounds>"
	RedactedAttachOutput = "<redacted: output exceeded bounds>"
)
