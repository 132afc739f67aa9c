package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/oecp/oecp/graph"
)

// WorkerOutcome statuses.
const (
	OutcomeVerified = "verified"
	OutcomeVerifier = "verifier"
	OutcomeError    = "error"
)

// Failure reasons of an error outcome.
const (
	ReasonDeclaredFailure          = "declared_failure"
	ReasonPolicyDenied             = "policy_denied"
	ReasonInteractiveInputRequired = "interactive_input_required"
	ReasonAuthenticationRequired   = "authentication_required"
	ReasonMalformedResult          = "malformed_result"
)

// ErrInvalidFailurePair is an error outcome whose (code, reason) pair is not
// one LegalFailurePair accepts.
var ErrInvalidFailurePair = errors.New("verifier: illegal worker error code/reason pair")

// ErrMalformedOutcome is an outcome that does not have the WorkerOutcome shape.
var ErrMalformedOutcome = errors.New("verifier: malformed worker outcome")

// Outcome is a normalised WorkerOutcome.
type Outcome struct {
	Status     string
	Output     json.RawMessage     // verified, verifier
	Signals    map[string]string   // verifier
	Diagnostic json.RawMessage     // verifier
	Artifacts  []graph.ArtifactRef // verified, verifier
	Code       string              // error
	Reason     string              // error
}

// LegalFailurePair reports whether (code, reason) is allowed: any code with
// declared_failure; refusal with policy_denied, interactive_input_required
// or authentication_required; malformed with malformed_result.
func LegalFailurePair(code, reason string) bool {
	if !slices.Contains(RuntimeErrors, code) {
		return false
	}
	switch reason {
	case ReasonDeclaredFailure:
		return true
	case ReasonPolicyDenied, ReasonInteractiveInputRequired, ReasonAuthenticationRequired:
		return code == "refusal"
	case ReasonMalformedResult:
		return code == "malformed"
	}
	return false
}

// Interaction is a provider-side event that cannot be answered
// non-interactively and is normalised to a refusal.
type Interaction int

// Interactions a worker binding may report.
const (
	InteractionInputRequested   Interaction = iota // ACP/A2A asks for user input
	InteractionAuthRequired                        // provider needs authentication
	InteractionPermissionDenied                    // the capability policy denied a request
)

// NormalizeInteraction maps an interaction request to its error outcome:
// every one is a refusal, with the matching reason.
func NormalizeInteraction(i Interaction) Outcome {
	switch i {
	case InteractionInputRequested:
		return Outcome{Status: OutcomeError, Code: "refusal", Reason: ReasonInteractiveInputRequired}
	case InteractionAuthRequired:
		return Outcome{Status: OutcomeError, Code: "refusal", Reason: ReasonAuthenticationRequired}
	}
	return Outcome{Status: OutcomeError, Code: "refusal", Reason: ReasonPolicyDenied}
}

// ParseOutcome strictly decodes and normalises a WorkerOutcome. An error
// outcome with an illegal pair fails with ErrInvalidFailurePair.
func ParseOutcome(data []byte) (Outcome, error) {
	var o Outcome
	var head struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return o, fmt.Errorf("%w: %v", ErrMalformedOutcome, err)
	}
	var allowed []string
	switch head.Status {
	case OutcomeVerified:
		allowed = []string{"status", "output", "artifacts"}
	case OutcomeVerifier:
		allowed = []string{"status", "output", "signals", "diagnostic", "artifacts"}
	case OutcomeError:
		allowed = []string{"status", "code", "reason"}
	default:
		return o, fmt.Errorf("%w: unknown status %q", ErrMalformedOutcome, head.Status)
	}
	obj, err := decodeObject(data, "outcome", allowed...)
	if err != nil {
		return o, fmt.Errorf("%w: %v", ErrMalformedOutcome, err)
	}
	o.Status = head.Status
	if head.Status == OutcomeError {
		dc := &decoder{}
		o.Code, o.Reason = dc.str(obj["code"], "code"), dc.str(obj["reason"], "reason")
		if dc.err != nil {
			return o, fmt.Errorf("%w: %v", ErrMalformedOutcome, dc.err)
		}
		if !LegalFailurePair(o.Code, o.Reason) {
			return o, fmt.Errorf("%w: %s with %s", ErrInvalidFailurePair, o.Code, o.Reason)
		}
		return o, nil
	}
	o.Output = bytes.Clone(obj["output"])
	var arts []json.RawMessage
	if err := json.Unmarshal(obj["artifacts"], &arts); err != nil || arts == nil {
		return o, fmt.Errorf("%w: artifacts must be an array", ErrMalformedOutcome)
	}
	for _, a := range arts {
		ref, err := graph.DecodeArtifactRef(a)
		if err != nil {
			return o, fmt.Errorf("%w: %v", ErrMalformedOutcome, err)
		}
		o.Artifacts = append(o.Artifacts, ref)
	}
	if head.Status == OutcomeVerifier {
		o.Diagnostic = bytes.Clone(obj["diagnostic"])
		if err := json.Unmarshal(obj["signals"], &o.Signals); err != nil || o.Signals == nil {
			return o, fmt.Errorf("%w: signals must map fields to labels", ErrMalformedOutcome)
		}
		for f, l := range o.Signals {
			if !graph.IsIdentifier(f) || !graph.IsIdentifier(l) {
				return o, fmt.Errorf("%w: signal %q=%q is not an identifier pair", ErrMalformedOutcome, f, l)
			}
		}
	}
	return o, nil
}
