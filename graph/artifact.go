package graph

import "strings"

// Redaction classes of an artifact (§7).
const (
	RedactionPublic       = "public"
	RedactionInternal     = "internal"
	RedactionConfidential = "confidential"
	RedactionRestricted   = "restricted"
)

// ArtifactRef is a byte-free artifact receipt (§7, graph.schema.json
// ArtifactRef). There is no field for bytes, URLs, paths or tokens.
type ArtifactRef struct {
	ArtifactID string // BoundedString256
	SHA256     string // 64 lowercase hex
	ByteLength uint64 // 0..2^53-1
	MediaType  string // BoundedString256
	TypeID     string // stable ref
	Producer   ArtifactProducer
	Lineage    ArtifactLineage
	Redaction  string
}

// ArtifactProducer names the node and worker that produced an artifact.
type ArtifactProducer struct {
	Node   string
	Worker string
}

// ArtifactLineage ties an artifact to a generation, run and attempt.
type ArtifactLineage struct {
	Generation uint64
	RunID      string
	Attempt    uint64
}

// MarshalJSON writes the reference order: artifactId, sha256, byteLength,
// mediaType, typeId, producer{node, worker}, lineage{generation, runId,
// attempt}, redaction.
func (a ArtifactRef) MarshalJSON() ([]byte, error) {
	w := &jsonWriter{}
	w.raw(`{"artifactId":`)
	w.str(a.ArtifactID)
	w.raw(`,"sha256":`)
	w.str(a.SHA256)
	w.raw(`,"byteLength":`)
	w.uint(a.ByteLength)
	w.raw(`,"mediaType":`)
	w.str(a.MediaType)
	w.raw(`,"typeId":`)
	w.str(a.TypeID)
	w.raw(`,"producer":{"node":`)
	w.str(a.Producer.Node)
	w.raw(`,"worker":`)
	w.str(a.Producer.Worker)
	w.raw(`},"lineage":{"generation":`)
	w.uint(a.Lineage.Generation)
	w.raw(`,"runId":`)
	w.str(a.Lineage.RunID)
	w.raw(`,"attempt":`)
	w.uint(a.Lineage.Attempt)
	w.raw(`},"redaction":`)
	w.str(a.Redaction)
	w.raw("}")
	return w.b, nil
}

// UnmarshalJSON applies DecodeArtifactRef.
func (a *ArtifactRef) UnmarshalJSON(data []byte) error {
	d, err := DecodeArtifactRef(data)
	if err != nil {
		return err
	}
	*a = d
	return nil
}

// IsSHA256Hex reports whether s is exactly 64 lowercase hex digits.
func IsSHA256Hex(s string) bool {
	if len(s) != SHA256HexLen {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// DecodeArtifactRef strictly decodes an ArtifactRef.
func DecodeArtifactRef(data []byte) (ArtifactRef, error) {
	tree, err := parseJSON(data)
	if err != nil {
		return ArtifactRef{}, errAt("$", ViolationMalformedJSON, "%v", err)
	}
	return decodeArtifactRef(tree, "$")
}

func decodeArtifactRef(v any, path string) (ArtifactRef, error) {
	var a ArtifactRef
	obj, err := asObject(v, path, "artifact reference", ViolationInvalidType)
	if err != nil {
		return a, err
	}
	if err := closed(obj, path, "artifact reference", ViolationForbiddenArtifactField,
		"artifactId", "sha256", "byteLength", "mediaType", "typeId", "producer", "lineage", "redaction"); err != nil {
		return a, err
	}
	r := &nodeReader{obj: obj, path: path, what: "artifact reference"}
	bounded := func(key string) string {
		v, p, ok := r.get(key)
		if !ok {
			return ""
		}
		s, err := asString(v, p, key)
		if err == nil && !IsBoundedString256(s) {
			err = errAt(p, ViolationInvalidArtifactValue, "%s must be 1..%d characters without control characters", key, MaxBoundedString256Chars)
		}
		r.err = err
		return s
	}
	a.ArtifactID = bounded("artifactId")
	if v, p, ok := r.get("sha256"); ok {
		if a.SHA256, r.err = asString(v, p, "sha256"); r.err == nil && !IsSHA256Hex(a.SHA256) {
			r.err = errAt(p, ViolationInvalidArtifactValue, "sha256 must be %d lowercase hex digits", SHA256HexLen)
		}
	}
	if v, p, ok := r.get("byteLength"); ok {
		a.ByteLength, r.err = decodeUint(v, p, "byteLength", 0)
	}
	a.MediaType = bounded("mediaType")
	if v, p, ok := r.get("typeId"); ok {
		a.TypeID, r.err = decodeStableRef(v, p, "artifact type id")
	}
	if v, p, ok := r.get("producer"); ok {
		a.Producer, r.err = decodeProducer(v, p)
	}
	if v, p, ok := r.get("lineage"); ok {
		a.Lineage, r.err = decodeLineage(v, p)
	}
	if v, p, ok := r.get("redaction"); ok {
		if a.Redaction, r.err = asString(v, p, "redaction"); r.err == nil {
			switch a.Redaction {
			case RedactionPublic, RedactionInternal, RedactionConfidential, RedactionRestricted:
			default:
				r.err = errAt(p, ViolationInvalidArtifactValue, "unknown redaction class %q", clip(a.Redaction))
			}
		}
	}
	return a, r.err
}

func decodeProducer(v any, path string) (ArtifactProducer, error) {
	var p ArtifactProducer
	obj, err := asObject(v, path, "artifact producer", ViolationInvalidType)
	if err != nil {
		return p, err
	}
	if err := closed(obj, path, "artifact producer", ViolationForbiddenArtifactField, "node", "worker"); err != nil {
		return p, err
	}
	r := &nodeReader{obj: obj, path: path, what: "artifact producer"}
	p.Node = r.ident("node", "node name")
	if v, vp, ok := r.get("worker"); ok {
		p.Worker, r.err = decodeStableRef(v, vp, "worker reference")
	}
	return p, r.err
}

func decodeLineage(v any, path string) (ArtifactLineage, error) {
	var l ArtifactLineage
	obj, err := asObject(v, path, "artifact lineage", ViolationInvalidType)
	if err != nil {
		return l, err
	}
	if err := closed(obj, path, "artifact lineage", ViolationForbiddenArtifactField, "generation", "runId", "attempt"); err != nil {
		return l, err
	}
	r := &nodeReader{obj: obj, path: path, what: "artifact lineage"}
	if gv, gp, ok := r.get("generation"); ok {
		l.Generation, r.err = decodeUint(gv, gp, "generation", 0)
	}
	if rv, rp, ok := r.get("runId"); ok {
		l.RunID, r.err = asString(rv, rp, "runId")
	}
	l.Attempt = r.positive("attempt")
	return l, r.err
}
