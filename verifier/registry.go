package verifier

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/oecp/oecp/graph"
)

// Look-up failures. Resolve wraps them; callers test with errors.Is.
var (
	ErrWorkerNotFound           = errors.New("worker descriptor not found")
	ErrWorkerVersionUnavailable = errors.New("worker descriptor version is unavailable")
)

// Registry is the worker registry port. Resolve returns the descriptor for
// an exact `name@version` reference as used by node (a step or verifier),
// or an error wrapping ErrWorkerNotFound or ErrWorkerVersionUnavailable. A
// static table ignores node; generic built-ins derive their contract from
// the node's declared types. The verifier validates what it gets, so a
// registry may return an invalid descriptor. Implementations must be safe
// for concurrent use.
type Registry interface {
	Resolve(ref string, node graph.Node) (*Descriptor, error)
}

// StaticRegistry is an explicit exact-match table:
// descriptors are returned as stored, never validated or derived.
type StaticRegistry struct {
	descriptors map[string]*Descriptor
	unavailable map[string]bool
}

// NewStaticRegistry builds a table registry; unavailable lists references
// whose version is known but unavailable.
func NewStaticRegistry(descriptors map[string]*Descriptor, unavailable []string) *StaticRegistry {
	r := &StaticRegistry{descriptors: maps.Clone(descriptors), unavailable: map[string]bool{}}
	if r.descriptors == nil {
		r.descriptors = map[string]*Descriptor{}
	}
	for _, u := range unavailable {
		r.unavailable[u] = true
	}
	return r
}

// LoadStaticRegistry reads a registry table: a flat JSON object whose
// keys containing '@' are worker references mapped to a descriptor (wire
// shape, kept even when it breaks the descriptor rules) or to
// {"unavailable":"version_unavailable"|"not_found"}; other keys (such as
// "rule") are documentation.
func LoadStaticRegistry(data []byte) (*StaticRegistry, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if top == nil {
		return nil, errors.New("registry: expected a JSON object")
	}
	descs := map[string]*Descriptor{}
	var unavailable []string
	for _, ref := range sortedKeys(top) {
		if !strings.Contains(ref, "@") {
			continue
		}
		raw := top[ref]
		var marker struct {
			Unavailable *string `json:"unavailable"`
		}
		var probe map[string]json.RawMessage
		if json.Unmarshal(raw, &probe) == nil && len(probe) == 1 && probe["unavailable"] != nil {
			if err := json.Unmarshal(raw, &marker); err != nil || marker.Unavailable == nil {
				return nil, fmt.Errorf("registry entry %s: bad unavailable marker", ref)
			}
			switch *marker.Unavailable {
			case "version_unavailable":
				unavailable = append(unavailable, ref)
			case "not_found":
			default:
				return nil, fmt.Errorf("registry entry %s: unknown unavailable kind %q", ref, *marker.Unavailable)
			}
			continue
		}
		d, err := ParseDescriptor(raw)
		if err != nil {
			return nil, fmt.Errorf("registry entry %s: %w", ref, err)
		}
		descs[ref] = d
	}
	return NewStaticRegistry(descs, unavailable), nil
}

// Resolve implements Registry; node is ignored.
func (r *StaticRegistry) Resolve(ref string, _ graph.Node) (*Descriptor, error) {
	if r.unavailable[ref] {
		return nil, fmt.Errorf("%w: %s", ErrWorkerVersionUnavailable, ref)
	}
	if d, ok := r.descriptors[ref]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrWorkerNotFound, ref)
}

// Built-in worker references served by BuiltinRegistry.
const (
	BuiltinEcho    = "builtin.echo@1"
	BuiltinFail    = "builtin.fail@1"
	BuiltinSleep   = "builtin.sleep@1"
	BuiltinApprove = "builtin.approve@1"
	BuiltinReject  = "builtin.reject@1"
)

// BuiltinPermissionPolicy is the permission policy built-in descriptors carry.
const BuiltinPermissionPolicy = "policy.builtin@1"

// builtinDescriptor is the builtin-binding template: both graph profiles, all
// four errors, no credentials.
func builtinDescriptor(ref string, in, out graph.PayloadType, v *VerifierContract) *Descriptor {
	return &Descriptor{
		Worker:        ref,
		GraphProfiles: []string{graph.ProfileFull, graph.ProfileSingleWorker},
		Binding:       Binding{ProtocolBuiltin, BuiltinBindingVersion, BuiltinBindingProfile},
		Contract: Contract{
			Input: in, Output: out, Verifier: v,
			Errors: append([]string(nil), RuntimeErrors...),
		},
		CapabilityPolicy: CapabilityPolicy{Autonomy: "strict", PermissionPolicy: BuiltinPermissionPolicy},
		ArtifactProfile: ArtifactProfile{
			AllowedTypeIds:    []string{"openengine.result@1"},
			AllowedMediaTypes: []string{"application/json"},
			MinimumRedaction:  "internal",
		},
		CredentialRequirements: []string{},
	}
}

// BuiltinRegistry serves the server's own built-in workers, whose
// descriptors follow the node they are resolved for:
//
//	builtin.echo@1     input = output = the node's input (returns its input)
//	builtin.fail@1     input and output follow the node (always fails)
//	builtin.sleep@1    input {ms: integer, required}, output null
//	builtin.approve@1  verifier; input follows the node; signals {verdict:[approved]}
//	builtin.reject@1   verifier; input follows the node; signals {verdict:[rejected]}
//
// The verifiers' output and diagnostic are null.
type BuiltinRegistry struct{}

func nodeTypes(n graph.Node) (in, out graph.PayloadType) {
	switch t := n.(type) {
	case *graph.Step:
		return t.Input, t.Output
	case *graph.Verifier:
		return t.Input, t.Output
	}
	null := graph.PayloadType{Kind: graph.PayloadNull}
	return null, null
}

// Resolve implements Registry.
func (BuiltinRegistry) Resolve(ref string, node graph.Node) (*Descriptor, error) {
	in, out := nodeTypes(node)
	null := graph.PayloadType{Kind: graph.PayloadNull}
	switch ref {
	case BuiltinEcho:
		return builtinDescriptor(ref, in, in, nil), nil
	case BuiltinFail:
		return builtinDescriptor(ref, in, out, nil), nil
	case BuiltinSleep:
		ms := graph.PayloadType{Kind: graph.PayloadRecord, Fields: map[string]graph.RecordField{
			"ms": {Type: graph.PayloadType{Kind: graph.PayloadInteger}, Required: true}}}
		return builtinDescriptor(ref, ms, null, nil), nil
	case BuiltinApprove:
		return builtinDescriptor(ref, in, null, &VerifierContract{Signals: map[string][]string{"verdict": {"approved"}}, Diagnostic: null}), nil
	case BuiltinReject:
		return builtinDescriptor(ref, in, null, &VerifierContract{Signals: map[string][]string{"verdict": {"rejected"}}, Diagnostic: null}), nil
	}
	return nil, fmt.Errorf("%w: %s", ErrWorkerNotFound, ref)
}

// Worker kinds of a CommandWorkerSpec.
const (
	KindStep     = "step"
	KindVerifier = "verifier"
)

// CommandWorkerSpec is the already-parsed type information of one
// host-configured command worker (`--workers FILE`): the engine owns argv,
// env and the rest; the verifier needs only the contract.
type CommandWorkerSpec struct {
	Worker     string              // name@version
	Kind       string              // KindStep or KindVerifier
	Input      graph.PayloadType   //
	Output     graph.PayloadType   //
	Signals    map[string][]string // verifier only
	Diagnostic graph.PayloadType   // verifier only
}

// CommandRegistry serves host-configured command workers as builtin-binding
// descriptors with fixed contracts.
type CommandRegistry struct{ table *StaticRegistry }

// NewCommandRegistry validates specs and builds their descriptors.
func NewCommandRegistry(specs []CommandWorkerSpec) (*CommandRegistry, error) {
	descs := map[string]*Descriptor{}
	for _, s := range specs {
		var v *VerifierContract
		switch s.Kind {
		case KindStep:
		case KindVerifier:
			v = &VerifierContract{Signals: maps.Clone(s.Signals), Diagnostic: s.Diagnostic}
			if v.Diagnostic.Kind == "" {
				v.Diagnostic = graph.PayloadType{Kind: graph.PayloadNull}
			}
		default:
			return nil, fmt.Errorf("command worker %s: kind must be step or verifier, got %q", s.Worker, s.Kind)
		}
		if _, dup := descs[s.Worker]; dup {
			return nil, fmt.Errorf("command worker %s is declared twice", s.Worker)
		}
		d := builtinDescriptor(s.Worker, s.Input, s.Output, v)
		if d.Contract.Input.Kind == "" || d.Contract.Output.Kind == "" {
			return nil, fmt.Errorf("command worker %s: input and output types are required", s.Worker)
		}
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("command worker %s: %w", s.Worker, err)
		}
		descs[s.Worker] = d
	}
	return &CommandRegistry{table: NewStaticRegistry(descs, nil)}, nil
}

// Resolve implements Registry.
func (r *CommandRegistry) Resolve(ref string, node graph.Node) (*Descriptor, error) {
	return r.table.Resolve(ref, node)
}

// Chain combines registries: each is asked in turn and the first answer
// that is not "not found" wins (a version-unavailable answer stops the
// search).
func Chain(regs ...Registry) Registry { return chain(regs) }

type chain []Registry

func (c chain) Resolve(ref string, node graph.Node) (*Descriptor, error) {
	for _, r := range c {
		if r == nil {
			continue
		}
		d, err := r.Resolve(ref, node)
		if err == nil || !errors.Is(err, ErrWorkerNotFound) {
			return d, err
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrWorkerNotFound, ref)
}
