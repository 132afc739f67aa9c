// Package graph is the OECP v1 graph contract: the closed, strictly decoded
// GraphSpec (profiles, payload types, nodes, selectors, bindings, guards), the
// payload algebra (subtyping and value validation, spec §5.4–§5.6), canonical
// JSON, compiled-IR identity, the dry-run node diff and idempotency
// fingerprints (§6), and the structural half of verification: duplicate
// names, shapes, ceilings, the termination witness and the bounds folds
// (§5.7–§5.8).
//
// Decoding is the security boundary of the protocol. Every object is closed,
// every string, identifier, stable reference, path, collection and integer is
// bounded as §2 requires, and there is no field through which a command,
// endpoint, credential, script, regular expression or URL could be expressed:
// such a document fails to decode with a *DecodeError, which the server maps to
// JSON-RPC -32602 with data.code SCHEMA_VIOLATION.
//
// Encoding (MarshalJSON) writes the reference field order with sets and maps
// sorted, in the reference's compact string escaping (§1.4); that is the form
// `get` returns as `spec`. CanonicalJSON writes the sorted-key form that
// identities and fingerprints hash.
//
// Structural is what an approve-all backend needs; the full flow-analysing
// verifier is built on the exported types, Walk, ComputeBounds and the
// Diagnostic helpers of this package.
package graph
