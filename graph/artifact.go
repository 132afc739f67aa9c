package graph

// Redaction classes of an artifact.
const (
	RedactionPublic       = "public"
	RedactionInternal     = "internal"
	RedactionConfidential = "confidential"
	RedactionRestricted   = "restricted"
)

// ArtifactRef is a byte-free artifact receipt. There is no field for bytes,
// URLs, paths or tokens.
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
func (a ArtifactRef) MarshalJSON() ([]byte, error) { return marshal(&a) }

func (a *ArtifactRef) writeJSON(w *jsonWriter) {
	w.open()
	w.strMember("artifactId", a.ArtifactID)
	w.strMember("sha256", a.SHA256)
	w.uintMember("byteLength", a.ByteLength)
	w.strMember("mediaType", a.MediaType)
	w.strMember("typeId", a.TypeID)
	w.valueMember("producer", &a.Producer)
	w.valueMember("lineage", &a.Lineage)
	w.strMember("redaction", a.Redaction)
	w.close()
}

func (p *ArtifactProducer) writeJSON(w *jsonWriter) { w.strObject("node", p.Node, "worker", p.Worker) }

func (l *ArtifactLineage) writeJSON(w *jsonWriter) {
	w.open()
	w.uintMember("generation", l.Generation)
	w.strMember("runId", l.RunID)
	w.uintMember("attempt", l.Attempt)
	w.close()
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

// DecodeArtifactRef strictly decodes an ArtifactRef.
func DecodeArtifactRef(data []byte) (ArtifactRef, error) {
	return decodeDocument(data, decodeArtifactRef)
}

func decodeArtifactRef(v any, path string) (ArtifactRef, error) {
	r := openClosed(v, path, "artifact reference", ViolationInvalidType, ViolationForbiddenArtifactField,
		"artifactId", "sha256", "byteLength", "mediaType", "typeId", "producer", "lineage", "redaction")
	a := ArtifactRef{
		ArtifactID: r.artifactValue("artifactId", IsBoundedString256, "artifactId must be 1..%d characters without control characters", MaxBoundedString256Chars),
		SHA256:     r.artifactValue("sha256", IsSHA256Hex, "sha256 must be %d lowercase hex digits", SHA256HexLen),
		ByteLength: r.count("byteLength"),
		MediaType:  r.artifactValue("mediaType", IsBoundedString256, "mediaType must be 1..%d characters without control characters", MaxBoundedString256Chars),
		TypeID:     r.stableRef("typeId", "artifact type id"),
		Producer:   member(r, "producer", decodeProducer),
		Lineage:    member(r, "lineage", decodeLineage),
		Redaction:  r.str("redaction", "redaction"),
	}
	switch a.Redaction {
	case RedactionPublic, RedactionInternal, RedactionConfidential, RedactionRestricted:
	default:
		r.fail("redaction", ViolationInvalidArtifactValue, "unknown redaction class %q", clip(a.Redaction))
	}
	return a, r.err
}

// artifactValue reads a string member that valid accepts; otherwise it
// fails with INVALID_ARTIFACT_VALUE and the message format, bound.
func (r *reader) artifactValue(key string, valid func(string) bool, format string, bound int) string {
	s := r.str(key, key)
	if r.err == nil && !valid(s) {
		r.fail(key, ViolationInvalidArtifactValue, format, bound)
	}
	return s
}

func decodeProducer(v any, path string) (ArtifactProducer, error) {
	r := openClosed(v, path, "artifact producer", ViolationInvalidType, ViolationForbiddenArtifactField, "node", "worker")
	return ArtifactProducer{Node: r.ident("node", "node name"), Worker: r.worker()}, r.err
}

func decodeLineage(v any, path string) (ArtifactLineage, error) {
	r := openClosed(v, path, "artifact lineage", ViolationInvalidType, ViolationForbiddenArtifactField, "generation", "runId", "attempt")
	return ArtifactLineage{Generation: r.count("generation"), RunID: r.str("runId", "runId"), Attempt: r.positive("attempt", "attempt")}, r.err
}
