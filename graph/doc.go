// Package graph is the OECP v1 graph contract: the closed, strictly decoded
// GraphSpec (profiles, payload types, nodes, selectors, bindings, guards), the
// payload algebra (subtyping and value validation), canonical JSON,
// compiled-IR identity, the dry-run node diff and idempotency fingerprints,
// and the structural half of verification: duplicate names, shapes,
// ceilings, the termination witness and the bounds folds.
//
// Decoding is the security boundary of the protocol. Every object is closed,
// every string, identifier, stable reference, path, collection and integer is
// bounded, and there is no field through which a command, endpoint,
// credential, script, regular expression or URL could be expressed: such a
// document fails to decode with a *DecodeError, which the server maps to
// JSON-RPC -32602 with data.code SCHEMA_VIOLATION. The files split it by
// concern: lexical.go holds the scalar rules (identifiers, stable references,
// instructions; BoundedString256 and control characters come from package
// protocol, which this package builds on), reader.go the generic tree helpers
// and the sticky-error reader every object decoder uses, decode.go the entry
// points, the graph and payload types, decode_node.go the nodes and
// decode_guard.go selectors, bindings, guards and joins. artifact.go, ir.go
// and diagnostic.go decode and encode the artifact receipt, the compiled IR
// with its bounds and the verifier diagnostic.
//
// Encoding (MarshalJSON, encode.go over the writer in json.go) writes the
// reference field order with sets and maps sorted, escaping only '"', '\'
// and C0 controls; that is the form `get` returns as `spec`. CanonicalJSON
// writes the sorted-key form that identities and fingerprints hash
// (identity.go).
//
// Structural (structural.go) is what an approve-all backend needs; the full
// flow-analysing verifier is built on the exported types, Walk, ComputeBounds
// and the Diagnostic helpers of this package.
package graph
