package verifier

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/oecp/oecp/graph"
)

// Binding protocols, versions and profiles allowed by §7.
const (
	ProtocolACP     = "acp"
	ProtocolA2A     = "a2a"
	ProtocolLegacy  = "legacy_zeroshot"
	ProtocolBuiltin = "builtin"

	BuiltinBindingVersion = "1"
	BuiltinBindingProfile = "openengine.worker.builtin/v1"

	// LegacyWorker is the reserved legacy facade worker reference.
	LegacyWorker = "legacy.zeroshot.ship@1"
)

// allowedBindings is the closed (protocol, version, profile) table of §7.
var allowedBindings = []Binding{
	{ProtocolACP, "1", "openengine.worker.acp/v1"},
	{ProtocolA2A, "1.0", "openengine.worker.a2a/1.0"},
	{ProtocolLegacy, "1", "legacy.zeroshot.ship/v1"},
	{ProtocolBuiltin, BuiltinBindingVersion, BuiltinBindingProfile},
}

// RuntimeErrors is the exact set of contract errors every descriptor
// declares, in the canonical order.
var RuntimeErrors = []string{"timeout", "crash", "malformed", "refusal"}

var redactionClasses = []string{"public", "internal", "confidential", "restricted"}

// Binding is a descriptor's protocol binding.
type Binding struct {
	Protocol string `json:"protocol"`
	Version  string `json:"version"`
	Profile  string `json:"profile"`
}

// VerifierContract is the verifier half of a worker contract.
type VerifierContract struct {
	Signals    map[string][]string // field -> label set
	Diagnostic graph.PayloadType
}

// Contract is a worker's typed contract.
type Contract struct {
	Input    graph.PayloadType
	Output   graph.PayloadType
	Verifier *VerifierContract // nil: a step worker
	Errors   []string
}

// CapabilityPolicy is `{autonomy, permissionPolicy}`.
type CapabilityPolicy struct {
	Autonomy         string
	PermissionPolicy string
}

// ArtifactProfile is the descriptor's artifact result profile.
type ArtifactProfile struct {
	AllowedTypeIds    []string
	AllowedMediaTypes []string
	MinimumRedaction  string
}

// Descriptor is a WorkerDescriptor (§7, worker.schema.json). ParseDescriptor
// checks only its JSON shape; Validate applies the descriptor rules, so a
// registry can hand over a stored descriptor that breaks them and the
// compatibility pass can reject it.
type Descriptor struct {
	Worker                 string
	GraphProfiles          []string
	Binding                Binding
	Contract               Contract
	CapabilityPolicy       CapabilityPolicy
	ArtifactProfile        ArtifactProfile
	CredentialRequirements []string
}

// DescriptorErrorCode classifies why a descriptor is invalid.
type DescriptorErrorCode string

// Descriptor error codes.
const (
	CodeMalformedDescriptor     DescriptorErrorCode = "malformed_descriptor"
	CodeForbiddenField          DescriptorErrorCode = "forbidden_field"
	CodeInvalidWorkerRef        DescriptorErrorCode = "invalid_worker_ref"
	CodeEmptyGraphProfiles      DescriptorErrorCode = "empty_graph_profiles"
	CodeDuplicateGraphProfiles  DescriptorErrorCode = "duplicate_graph_profiles"
	CodeUnknownGraphProfile     DescriptorErrorCode = "unknown_graph_profile"
	CodeUnsupportedBinding      DescriptorErrorCode = "unsupported_binding"
	CodeInvalidBuiltinBinding   DescriptorErrorCode = "invalid_builtin_binding"
	CodeInvalidLegacyBinding    DescriptorErrorCode = "invalid_legacy_binding"
	CodeUnknownWorkerError      DescriptorErrorCode = "unknown_worker_error"
	CodeIncompleteWorkerErrors  DescriptorErrorCode = "incomplete_worker_errors"
	CodeInvalidVerifierContract DescriptorErrorCode = "invalid_verifier_contract"
	CodeInvalidCapabilityPolicy DescriptorErrorCode = "invalid_capability_policy"
	CodeEmptyArtifactTypes      DescriptorErrorCode = "empty_artifact_types"
	CodeInvalidArtifactProfile  DescriptorErrorCode = "invalid_artifact_profile"
	CodeDuplicateCredentials    DescriptorErrorCode = "duplicate_credential_requirements"
	CodeInvalidCredential       DescriptorErrorCode = "invalid_credential_requirement"
)

// DescriptorError is an invalid descriptor: Code for callers that branch,
// Reason is the human message (used after "invalid resolved descriptor: ").
type DescriptorError struct {
	Code   DescriptorErrorCode
	Reason string
}

func (e *DescriptorError) Error() string { return e.Reason }

func derr(code DescriptorErrorCode, format string, args ...any) *DescriptorError {
	return &DescriptorError{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// --- shape decoding ----------------------------------------------------------

func decodeObject(raw json.RawMessage, what string, allowed ...string) (map[string]json.RawMessage, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, derr(CodeMalformedDescriptor, "%s must be an object", what)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, derr(CodeMalformedDescriptor, "%s must be an object", what)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, derr(CodeForbiddenField, "%s has forbidden field %q", what, k)
		}
	}
	for _, k := range allowed {
		if _, ok := obj[k]; !ok {
			return nil, derr(CodeMalformedDescriptor, "%s is missing field %s", what, k)
		}
	}
	return obj, nil
}

func decodeStr(raw json.RawMessage, what string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", derr(CodeMalformedDescriptor, "%s must be a string", what)
	}
	return s, nil
}

func decodeStrs(raw json.RawMessage, what string) ([]string, error) {
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil || ss == nil {
		return nil, derr(CodeMalformedDescriptor, "%s must be an array of strings", what)
	}
	return ss, nil
}

func decodeType(raw json.RawMessage, what string) (graph.PayloadType, error) {
	p, err := graph.DecodePayloadType(raw)
	if err != nil {
		return p, derr(CodeMalformedDescriptor, "%s is not a payload type: %v", what, err)
	}
	return p, nil
}

// ParseDescriptor decodes a WorkerDescriptor in the worker.schema.json wire
// shape. Objects are closed: any other field (a command, endpoint, secret,
// path, inline bytes, ...) is a CodeForbiddenField error. Value rules are
// left to Validate.
func ParseDescriptor(data []byte) (*Descriptor, error) {
	top, err := decodeObject(data, "descriptor", "worker", "graphProfiles", "binding", "contract",
		"capabilityPolicy", "artifactProfile", "credentialRequirements")
	if err != nil {
		return nil, err
	}
	d := &Descriptor{}
	if d.Worker, err = decodeStr(top["worker"], "worker"); err != nil {
		return nil, err
	}
	if d.GraphProfiles, err = decodeStrs(top["graphProfiles"], "graphProfiles"); err != nil {
		return nil, err
	}
	b, err := decodeObject(top["binding"], "binding", "protocol", "version", "profile")
	if err != nil {
		return nil, err
	}
	if d.Binding.Protocol, err = decodeStr(b["protocol"], "binding.protocol"); err != nil {
		return nil, err
	}
	if d.Binding.Version, err = decodeStr(b["version"], "binding.version"); err != nil {
		return nil, err
	}
	if d.Binding.Profile, err = decodeStr(b["profile"], "binding.profile"); err != nil {
		return nil, err
	}
	// contract.verifier may be absent (schema: not required) or null.
	var c map[string]json.RawMessage
	if err := json.Unmarshal(top["contract"], &c); err != nil || c == nil {
		return nil, derr(CodeMalformedDescriptor, "contract must be an object")
	}
	if _, ok := c["verifier"]; !ok {
		c["verifier"] = json.RawMessage("null")
	}
	craw, _ := json.Marshal(c)
	if c, err = decodeObject(craw, "contract", "input", "output", "verifier", "errors"); err != nil {
		return nil, err
	}
	if d.Contract.Input, err = decodeType(c["input"], "contract.input"); err != nil {
		return nil, err
	}
	if d.Contract.Output, err = decodeType(c["output"], "contract.output"); err != nil {
		return nil, err
	}
	if d.Contract.Errors, err = decodeStrs(c["errors"], "contract.errors"); err != nil {
		return nil, err
	}
	if !bytes.Equal(bytes.TrimSpace(c["verifier"]), []byte("null")) {
		v, err := decodeObject(c["verifier"], "contract.verifier", "signals", "diagnostic")
		if err != nil {
			return nil, err
		}
		vc := &VerifierContract{}
		if err := json.Unmarshal(v["signals"], &vc.Signals); err != nil || vc.Signals == nil {
			return nil, derr(CodeMalformedDescriptor, "contract.verifier.signals must map fields to label arrays")
		}
		if vc.Diagnostic, err = decodeType(v["diagnostic"], "contract.verifier.diagnostic"); err != nil {
			return nil, err
		}
		d.Contract.Verifier = vc
	}
	cp, err := decodeObject(top["capabilityPolicy"], "capabilityPolicy", "autonomy", "permissionPolicy")
	if err != nil {
		return nil, err
	}
	if d.CapabilityPolicy.Autonomy, err = decodeStr(cp["autonomy"], "capabilityPolicy.autonomy"); err != nil {
		return nil, err
	}
	if d.CapabilityPolicy.PermissionPolicy, err = decodeStr(cp["permissionPolicy"], "capabilityPolicy.permissionPolicy"); err != nil {
		return nil, err
	}
	ap, err := decodeObject(top["artifactProfile"], "artifactProfile", "allowedTypeIds", "allowedMediaTypes", "minimumRedaction")
	if err != nil {
		return nil, err
	}
	if d.ArtifactProfile.AllowedTypeIds, err = decodeStrs(ap["allowedTypeIds"], "artifactProfile.allowedTypeIds"); err != nil {
		return nil, err
	}
	if d.ArtifactProfile.AllowedMediaTypes, err = decodeStrs(ap["allowedMediaTypes"], "artifactProfile.allowedMediaTypes"); err != nil {
		return nil, err
	}
	if d.ArtifactProfile.MinimumRedaction, err = decodeStr(ap["minimumRedaction"], "artifactProfile.minimumRedaction"); err != nil {
		return nil, err
	}
	if d.CredentialRequirements, err = decodeStrs(top["credentialRequirements"], "credentialRequirements"); err != nil {
		return nil, err
	}
	return d, nil
}

func hasDuplicate(ss []string) bool {
	seen := make(map[string]bool, len(ss))
	for _, s := range ss {
		if seen[s] {
			return true
		}
		seen[s] = true
	}
	return false
}

// Validate applies the descriptor rules of §7 and worker.schema.json and
// returns the first violation as a *DescriptorError.
func (d *Descriptor) Validate() error {
	if d == nil {
		return derr(CodeMalformedDescriptor, "descriptor is missing")
	}
	if !graph.IsStableRef(d.Worker) {
		return derr(CodeInvalidWorkerRef, "worker reference %q is not name@version", d.Worker)
	}
	if len(d.GraphProfiles) == 0 {
		return derr(CodeEmptyGraphProfiles, "worker graph profiles must not be empty")
	}
	if hasDuplicate(d.GraphProfiles) {
		return derr(CodeDuplicateGraphProfiles, "worker graph profiles must be unique")
	}
	for _, p := range d.GraphProfiles {
		if p != graph.ProfileFull && p != graph.ProfileSingleWorker {
			return derr(CodeUnknownGraphProfile, "unknown graph profile %q", p)
		}
	}
	if !slices.Contains(allowedBindings, d.Binding) {
		return derr(CodeUnsupportedBinding, "unsupported worker binding %s %s %s", d.Binding.Protocol, d.Binding.Version, d.Binding.Profile)
	}
	if d.Binding.Protocol == ProtocolBuiltin && len(d.CredentialRequirements) > 0 {
		return derr(CodeInvalidBuiltinBinding, "builtin workers must not require credentials")
	}
	if err := d.validateLegacy(); err != nil {
		return err
	}
	for _, e := range d.Contract.Errors {
		if !slices.Contains(RuntimeErrors, e) {
			return derr(CodeUnknownWorkerError, "unknown worker error %q", e)
		}
	}
	if len(d.Contract.Errors) != len(RuntimeErrors) || hasDuplicate(d.Contract.Errors) {
		return derr(CodeIncompleteWorkerErrors, "worker errors must contain timeout, crash, malformed, and refusal")
	}
	if v := d.Contract.Verifier; v != nil {
		for _, f := range sortedKeys(v.Signals) {
			labels := v.Signals[f]
			if !graph.IsIdentifier(f) {
				return derr(CodeInvalidVerifierContract, "verifier signal field %q is not an identifier", f)
			}
			if len(labels) == 0 || len(labels) > graph.MaxLabelSetLen || hasDuplicate(labels) {
				return derr(CodeInvalidVerifierContract, "verifier signal %s needs 1..%d unique labels", f, graph.MaxLabelSetLen)
			}
			for _, l := range labels {
				if !graph.IsIdentifier(l) {
					return derr(CodeInvalidVerifierContract, "verifier signal %s label %q is not an identifier", f, l)
				}
			}
		}
	}
	if d.CapabilityPolicy.Autonomy != "strict" {
		return derr(CodeInvalidCapabilityPolicy, "capability autonomy must be strict")
	}
	if !graph.IsStableRef(d.CapabilityPolicy.PermissionPolicy) {
		return derr(CodeInvalidCapabilityPolicy, "permission policy %q is not name@version", d.CapabilityPolicy.PermissionPolicy)
	}
	ap := d.ArtifactProfile
	if len(ap.AllowedTypeIds) == 0 {
		return derr(CodeEmptyArtifactTypes, "allowed artifact type ids must not be empty")
	}
	if hasDuplicate(ap.AllowedTypeIds) {
		return derr(CodeInvalidArtifactProfile, "allowed artifact type ids must be unique")
	}
	for _, t := range ap.AllowedTypeIds {
		if !graph.IsStableRef(t) {
			return derr(CodeInvalidArtifactProfile, "artifact type id %q is not name@version", t)
		}
	}
	if len(ap.AllowedMediaTypes) == 0 || hasDuplicate(ap.AllowedMediaTypes) {
		return derr(CodeInvalidArtifactProfile, "allowed media types must be non-empty and unique")
	}
	for _, m := range ap.AllowedMediaTypes {
		if !graph.IsBoundedString256(m) {
			return derr(CodeInvalidArtifactProfile, "media type %q is not a bounded string", m)
		}
	}
	if !slices.Contains(redactionClasses, ap.MinimumRedaction) {
		return derr(CodeInvalidArtifactProfile, "unknown minimum redaction %q", ap.MinimumRedaction)
	}
	if hasDuplicate(d.CredentialRequirements) {
		return derr(CodeDuplicateCredentials, "credential requirements must be unique")
	}
	for _, c := range d.CredentialRequirements {
		if !graph.IsStableRef(c) {
			return derr(CodeInvalidCredential, "credential handle %q is not name@version", c)
		}
	}
	return nil
}

func (d *Descriptor) validateLegacy() error {
	legacyBinding := d.Binding.Protocol == ProtocolLegacy
	if (d.Worker == LegacyWorker) != legacyBinding {
		return derr(CodeInvalidLegacyBinding, "legacy worker identity and binding protocol must agree")
	}
	if !legacyBinding {
		return nil
	}
	if !slices.Equal(d.GraphProfiles, []string{graph.ProfileSingleWorker}) {
		return derr(CodeInvalidLegacyBinding, "legacy worker allows only the single-worker graph profile")
	}
	req, res := legacyTypes()
	if !payloadEqual(d.Contract.Input, req) || !payloadEqual(d.Contract.Output, res) || d.Contract.Verifier != nil {
		return derr(CodeInvalidLegacyBinding, "legacy worker contract must be the canonical LegacyShipRequest/LegacyShipResult with no verifier")
	}
	return nil
}

func payloadEqual(a, b graph.PayloadType) bool {
	x, err1 := graph.CanonicalJSON(a)
	y, err2 := graph.CanonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
