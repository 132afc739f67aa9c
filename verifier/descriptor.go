package verifier

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/oecp/oecp/graph"
)

// Binding protocols, versions and profiles a worker may declare.
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

// allowedBindings is the closed table of (protocol, version, profile)
// triples; every other binding is unsupported.
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

// Descriptor is a WorkerDescriptor. ParseDescriptor
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
	if isNull(raw) {
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

// decoder decodes the members of descriptor objects, keeping the first
// error: once one member is malformed, later calls decode nothing.
type decoder struct{ err error }

func (dc *decoder) object(raw json.RawMessage, what string, allowed ...string) map[string]json.RawMessage {
	if dc.err != nil {
		return nil
	}
	obj, err := decodeObject(raw, what, allowed...)
	dc.err = err
	return obj
}

func (dc *decoder) str(raw json.RawMessage, what string) string {
	if dc.err != nil {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		dc.err = derr(CodeMalformedDescriptor, "%s must be a string", what)
	}
	return s
}

func (dc *decoder) strs(raw json.RawMessage, what string) []string {
	if dc.err != nil {
		return nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err != nil || ss == nil {
		dc.err = derr(CodeMalformedDescriptor, "%s must be an array of strings", what)
	}
	return ss
}

func (dc *decoder) payloadType(raw json.RawMessage, what string) graph.PayloadType {
	if dc.err != nil {
		return graph.PayloadType{}
	}
	p, err := graph.DecodePayloadType(raw)
	if err != nil {
		dc.err = derr(CodeMalformedDescriptor, "%s is not a payload type: %v", what, err)
	}
	return p
}

// contract decodes the contract object, whose verifier member may be absent
// or null (a step worker).
func (dc *decoder) contract(raw json.RawMessage) (c Contract) {
	if dc.err != nil {
		return c
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		dc.err = derr(CodeMalformedDescriptor, "contract must be an object")
		return c
	}
	if _, ok := obj["verifier"]; !ok {
		obj["verifier"] = json.RawMessage("null")
	}
	craw, _ := json.Marshal(obj)
	obj = dc.object(craw, "contract", "input", "output", "verifier", "errors")
	c.Input = dc.payloadType(obj["input"], "contract.input")
	c.Output = dc.payloadType(obj["output"], "contract.output")
	c.Errors = dc.strs(obj["errors"], "contract.errors")
	if dc.err != nil || isNull(obj["verifier"]) {
		return c
	}
	v := dc.object(obj["verifier"], "contract.verifier", "signals", "diagnostic")
	if dc.err != nil {
		return c
	}
	vc := &VerifierContract{}
	if err := json.Unmarshal(v["signals"], &vc.Signals); err != nil || vc.Signals == nil {
		dc.err = derr(CodeMalformedDescriptor, "contract.verifier.signals must map fields to label arrays")
		return c
	}
	vc.Diagnostic = dc.payloadType(v["diagnostic"], "contract.verifier.diagnostic")
	c.Verifier = vc
	return c
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// ParseDescriptor decodes a WorkerDescriptor in its wire shape. Objects are
// closed: any other field (a command, endpoint, secret, path, inline bytes,
// ...) is a CodeForbiddenField error. Value rules are left to Validate.
func ParseDescriptor(data []byte) (*Descriptor, error) {
	dc := &decoder{}
	top := dc.object(data, "descriptor", "worker", "graphProfiles", "binding", "contract",
		"capabilityPolicy", "artifactProfile", "credentialRequirements")
	d := &Descriptor{}
	d.Worker = dc.str(top["worker"], "worker")
	d.GraphProfiles = dc.strs(top["graphProfiles"], "graphProfiles")
	b := dc.object(top["binding"], "binding", "protocol", "version", "profile")
	d.Binding.Protocol = dc.str(b["protocol"], "binding.protocol")
	d.Binding.Version = dc.str(b["version"], "binding.version")
	d.Binding.Profile = dc.str(b["profile"], "binding.profile")
	d.Contract = dc.contract(top["contract"])
	cp := dc.object(top["capabilityPolicy"], "capabilityPolicy", "autonomy", "permissionPolicy")
	d.CapabilityPolicy.Autonomy = dc.str(cp["autonomy"], "capabilityPolicy.autonomy")
	d.CapabilityPolicy.PermissionPolicy = dc.str(cp["permissionPolicy"], "capabilityPolicy.permissionPolicy")
	ap := dc.object(top["artifactProfile"], "artifactProfile", "allowedTypeIds", "allowedMediaTypes", "minimumRedaction")
	d.ArtifactProfile.AllowedTypeIds = dc.strs(ap["allowedTypeIds"], "artifactProfile.allowedTypeIds")
	d.ArtifactProfile.AllowedMediaTypes = dc.strs(ap["allowedMediaTypes"], "artifactProfile.allowedMediaTypes")
	d.ArtifactProfile.MinimumRedaction = dc.str(ap["minimumRedaction"], "artifactProfile.minimumRedaction")
	d.CredentialRequirements = dc.strs(top["credentialRequirements"], "credentialRequirements")
	if dc.err != nil {
		return nil, dc.err
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

// Validate applies the descriptor rules and returns the first violation as a
// *DescriptorError, checking in turn: identity and graph profiles, binding,
// legacy facade, errors, verifier signals, capability policy, artifact
// profile and credential requirements.
func (d *Descriptor) Validate() error {
	if d == nil {
		return derr(CodeMalformedDescriptor, "descriptor is missing")
	}
	for _, check := range []func() error{d.validateIdentity, d.validateBinding, d.validateLegacy, d.validateErrors,
		d.validateSignals, d.validatePolicy, d.validateArtifactProfile, d.validateCredentials} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateIdentity: the worker is name@version and its graph profiles are a
// non-empty set of known profiles.
func (d *Descriptor) validateIdentity() error {
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
	return nil
}

// validateBinding: the binding is one of the allowed triples, and a builtin
// worker requires no credentials.
func (d *Descriptor) validateBinding() error {
	if !slices.Contains(allowedBindings, d.Binding) {
		return derr(CodeUnsupportedBinding, "unsupported worker binding %s %s %s", d.Binding.Protocol, d.Binding.Version, d.Binding.Profile)
	}
	if d.Binding.Protocol == ProtocolBuiltin && len(d.CredentialRequirements) > 0 {
		return derr(CodeInvalidBuiltinBinding, "builtin workers must not require credentials")
	}
	return nil
}

// validateErrors: the contract declares exactly the four runtime errors.
func (d *Descriptor) validateErrors() error {
	for _, e := range d.Contract.Errors {
		if !slices.Contains(RuntimeErrors, e) {
			return derr(CodeUnknownWorkerError, "unknown worker error %q", e)
		}
	}
	if len(d.Contract.Errors) != len(RuntimeErrors) || hasDuplicate(d.Contract.Errors) {
		return derr(CodeIncompleteWorkerErrors, "worker errors must contain timeout, crash, malformed, and refusal")
	}
	return nil
}

// validateSignals: every verifier signal is an identifier with 1 to
// graph.MaxLabelSetLen unique identifier labels.
func (d *Descriptor) validateSignals() error {
	v := d.Contract.Verifier
	if v == nil {
		return nil
	}
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
	return nil
}

// validatePolicy: autonomy is strict and the permission policy is
// name@version.
func (d *Descriptor) validatePolicy() error {
	if d.CapabilityPolicy.Autonomy != "strict" {
		return derr(CodeInvalidCapabilityPolicy, "capability autonomy must be strict")
	}
	if !graph.IsStableRef(d.CapabilityPolicy.PermissionPolicy) {
		return derr(CodeInvalidCapabilityPolicy, "permission policy %q is not name@version", d.CapabilityPolicy.PermissionPolicy)
	}
	return nil
}

// validateArtifactProfile: a non-empty set of name@version type ids, a
// non-empty set of bounded media types and a known minimum redaction class.
func (d *Descriptor) validateArtifactProfile() error {
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
	return nil
}

// validateCredentials: credential requirements are unique name@version
// handles.
func (d *Descriptor) validateCredentials() error {
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
