package graph

import "strconv"

// Decode strictly decodes a GraphSpec. data may be a whole document or a
// json.RawMessage cut out of larger params. Every failure is a
// *DecodeError.
func Decode(data []byte) (*GraphSpec, error) { return decodeDocument(data, decodeGraph) }

// UnmarshalJSON lets a GraphSpec be a field of a larger params struct; it
// applies the same strict rules as Decode and fails with a *DecodeError.
func (g *GraphSpec) UnmarshalJSON(data []byte) error {
	d, err := Decode(data)
	if err == nil {
		*g = *d
	}
	return err
}

// DecodePayloadType strictly decodes one PayloadType.
func DecodePayloadType(data []byte) (PayloadType, error) {
	return decodeDocument(data, decodePayload)
}

// UnmarshalJSON applies DecodePayloadType.
func (p *PayloadType) UnmarshalJSON(data []byte) error {
	d, err := DecodePayloadType(data)
	if err == nil {
		*p = d
	}
	return err
}

// kindTag describes an object whose "kind" member selects the members it
// may have: a payload type, a guard or a node.
type kindTag[K ~string] struct {
	what     string // the object: "guard"
	noun     string // its kind, in "unknown guard kind"
	suffix   string // after the kind, naming one shape: "in guard"
	code     Violation
	expected string // the kinds, for the unknown-kind message
	members  map[K][]string
}

// open starts reading v as a tagged object: not an object, a missing kind
// and an unknown kind all fail with the tag's code. It returns the kind and
// its allowed members; the reader names the object by kind ("in guard").
func (t *kindTag[K]) open(v any, path string) (*reader, K, []string) {
	r := openObject(v, path, t.what, t.code)
	if r.err != nil {
		return r, "", nil
	}
	kv, ok := r.obj["kind"]
	if !ok {
		r.err = errAt(path, t.code, "%s is missing its kind", t.what)
		return r, "", nil
	}
	ks, _ := kv.(string)
	allowed, ok := t.members[K(ks)]
	if !ok {
		r.fail("kind", t.code, "unknown %s kind %s (expected %s)", t.noun, quoteAny(kv), t.expected)
		return r, "", nil
	}
	r.what = ks + t.suffix
	return r, K(ks), allowed
}

func decodeGraph(v any, path string) (*GraphSpec, error) {
	r := openClosed(v, path, "graph", ViolationInvalidType, ViolationUnknownField, "profile", "initialInput", "policy", "root")
	return decodeGraphFields(r)
}

// decodeGraphFields reads the graph members of an object already checked
// for closedness (a graph or a compiled IR).
func decodeGraphFields(r *reader) (*GraphSpec, error) {
	g := &GraphSpec{Profile: r.str("profile", "profile")}
	if r.err == nil && g.Profile != ProfileFull && g.Profile != ProfileSingleWorker {
		r.fail("profile", ViolationUnknownProfile, "unknown graph profile %q (expected %s or %s)", clip(g.Profile), ProfileFull, ProfileSingleWorker)
	}
	g.InitialInput = r.payload("initialInput")
	g.Policy = member(r, "policy", decodePolicy)
	g.Root = member(r, "root", decodeNode)
	if r.err != nil {
		return nil, r.err
	}
	return g, nil
}

func decodePolicy(v any, path string) (PolicyBinding, error) {
	r := openClosed(v, path, "policy binding", ViolationInvalidType, ViolationUnknownField, "policy", "default")
	return PolicyBinding{
		Policy:  r.stableRef("policy", "policy reference"),
		Default: r.oneOf("default", "policy default", PolicyDefaultDeny),
	}, r.err
}

var payloadTag = &kindTag[PayloadKind]{
	what: "payload type", noun: "payload", suffix: " payload type", code: ViolationUnsafePayloadKind,
	expected: "null, boolean, integer, number, string, record, array or enum",
	members: map[PayloadKind][]string{
		PayloadNull: {"kind"}, PayloadBoolean: {"kind"}, PayloadInteger: {"kind"}, PayloadNumber: {"kind"}, PayloadString: {"kind"},
		PayloadRecord: {"kind", "fields"}, PayloadArray: {"kind", "items"}, PayloadEnum: {"kind", "values"},
	},
}

func decodePayload(v any, path string) (PayloadType, error) {
	r, kind, allowed := payloadTag.open(v, path)
	r.only(ViolationUnsafePayloadConstraint, allowed...)
	p := PayloadType{Kind: kind}
	switch kind {
	case PayloadRecord:
		p.Fields = member(r, "fields", decodeRecordFields)
	case PayloadArray:
		p.Items = memberPtr(r, "items", decodePayload)
	case PayloadEnum:
		p.Values = r.labelSet("values", "enum values")
	}
	return p, r.err
}

// recordFieldName is the message for a record field name that is not an
// identifier.
var recordFieldName = "record field name %q is not an identifier (^[A-Za-z_][A-Za-z0-9_.-]*$, 1.." + strconv.Itoa(MaxIdentifierBytes) + " bytes)"

func decodeRecordFields(v any, path string) (map[string]RecordField, error) {
	return decodeNameMap(v, path, "record fields", recordFieldName, decodeRecordField)
}

func decodeRecordField(v any, path string) (RecordField, error) {
	r := openClosed(v, path, "record field", ViolationInvalidType, ViolationUnsafePayloadConstraint, "type", "required")
	return RecordField{Type: r.payload("type"), Required: member(r, "required", named("required", asBool))}, r.err
}

func asBool(v any, path, what string) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, errAt(path, ViolationInvalidType, "%s must be a boolean, got %s", what, jsonTypeName(v))
	}
	return b, nil
}
