package graph

import (
	"errors"
	"fmt"
)

// ErrSchemaViolation matches (errors.Is) every *DecodeError. On the wire a
// decode failure is JSON-RPC -32602 "Invalid params" with data.code
// SCHEMA_VIOLATION; the variant with details.reason carries
// DecodeError.Error().
var ErrSchemaViolation = errors.New("schema violation")

// Violation classifies a decode failure. The labels are the expectedCode
// vocabulary of the conformance pack's negative graph vectors where one
// exists.
// They never go on the wire: every violation is SCHEMA_VIOLATION there.
type Violation string

// Violation classes.
const (
	ViolationMalformedJSON           Violation = "MALFORMED_JSON"
	ViolationInvalidType             Violation = "INVALID_TYPE"       // wrong JSON type
	ViolationMissingField            Violation = "MISSING_FIELD"      // required key absent
	ViolationUnknownField            Violation = "UNKNOWN_FIELD"      // closed object got an extra key
	ViolationInvalidValue            Violation = "INVALID_VALUE"      // out of a closed set
	ViolationInvalidCollection       Violation = "INVALID_COLLECTION" // list size out of bounds
	ViolationInvalidPath             Violation = "INVALID_PATH"       // FieldPath size out of bounds
	ViolationInvalidString           Violation = "INVALID_STRING"     // bounded string out of bounds
	ViolationUnknownProfile          Violation = "UNKNOWN_PROFILE"
	ViolationUnknownNode             Violation = "UNKNOWN_NODE"
	ViolationDuplicateEnum           Violation = "DUPLICATE_ENUM"
	ViolationEmptyEnum               Violation = "EMPTY_ENUM"
	ViolationInvalidStableRef        Violation = "INVALID_STABLE_REF"
	ViolationInvalidIdentifier       Violation = "INVALID_IDENTIFIER"
	ViolationUnsafePayloadKind       Violation = "UNSAFE_PAYLOAD_KIND"
	ViolationUnsafePayloadConstraint Violation = "UNSAFE_PAYLOAD_CONSTRAINT"
	ViolationExecutableGuard         Violation = "EXECUTABLE_GUARD"
	ViolationStringSelector          Violation = "STRING_SELECTOR"
	ViolationForbiddenWorkerField    Violation = "FORBIDDEN_WORKER_FIELD"
	ViolationInvalidBound            Violation = "INVALID_BOUND"
	ViolationForbiddenArtifactField  Violation = "FORBIDDEN_ARTIFACT_FIELD"
	ViolationInvalidArtifactValue    Violation = "INVALID_ARTIFACT_VALUE"
)

// DecodeError reports why a document is not a valid graph-contract value.
type DecodeError struct {
	// Path locates the offending value, rooted at "$" (e.g.
	// "$.root.children[0].worker").
	Path string
	// Violation classifies the failure.
	Violation Violation
	// Message is a human-readable explanation without the path.
	Message string
}

// Error returns "<path>: <message>", suitable as details.reason.
func (e *DecodeError) Error() string { return e.Path + ": " + e.Message }

// Is makes errors.Is(err, ErrSchemaViolation) hold.
func (e *DecodeError) Is(target error) bool { return target == ErrSchemaViolation }

func errAt(path string, v Violation, format string, args ...any) *DecodeError {
	return &DecodeError{Path: path, Violation: v, Message: fmt.Sprintf(format, args...)}
}
