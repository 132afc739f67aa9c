package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Typed params of every method. All params objects are closed: unknown
// keys fail decoding (spec/01 §1.5). Nested duplicate keys collapse
// last-wins. Fields whose explicit null differs from absence carry a Has
// flag.

// InitializeParams are initialize's params.
type InitializeParams struct {
	ProtocolVersion string `json:"protocolVersion"`
}

// GetParams are get's params.
type GetParams struct {
	AtCursor *string `json:"atCursor,omitempty"`
}

// PlanParams are plan's params. Graph is the raw GraphSpec; the backend
// decodes it strictly (its failure is SCHEMA_VIOLATION without details).
type PlanParams struct {
	Graph json.RawMessage `json:"graph"`
}

// ApplyParams are apply's params.
type ApplyParams struct {
	Graph json.RawMessage
	// Input is meaningful when HasInput; explicit null counts as present.
	Input          Value
	HasInput       bool
	DryRun         bool
	IfGeneration   *int64
	IdempotencyKey *string
}

// UpdateParams are update's params; at least one of the three changes.
type UpdateParams struct {
	Labels         map[string]string // nil when absent
	HasLabels      bool
	LogLevel       *string
	Suspended      *bool
	IfGeneration   int64
	IdempotencyKey string
}

// StopParams are stop's params.
type StopParams struct {
	Mode           string
	IfGeneration   int64
	IdempotencyKey string
}

// RetryParams are retry's params.
type RetryParams struct {
	IfGeneration   int64
	IdempotencyKey string
}

// ResubmitParams are resubmit's params.
type ResubmitParams struct {
	IfGeneration     int64
	IfRunID          string
	IdempotencyKey   string
	ReplacementInput Value
	HasReplacement   bool
}

// DeleteParams are delete's params; IfRunID nil means "expect no run".
type DeleteParams struct {
	IfGeneration   int64
	IfRunID        *string
	IdempotencyKey string
}

// WatchParams are watch's params.
type WatchParams struct {
	RunID      *string
	FromCursor *string
}

// LogsParams are logs' params (exactly {}).
type LogsParams struct{}

// AgentAttachParams are agent/attach's params.
type AgentAttachParams struct {
	Execution string
}

// RunParams are the params of the native-v2 run/* methods. The v1 server
// does not serve them; they are decoded only as far as the closed-object
// and type rules go, so that malformed requests answer SCHEMA_VIOLATION
// before the "does not support" error.
type RunParams struct {
	RunID      string
	Submission json.RawMessage
	FromCursor *string
	Execution  *string
}

// Log levels accepted by update.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

// ErrDecode is the sentinel wrapped by every params decoding failure.
var ErrDecode = errors.New("invalid params")

// object is a closed params object collapsed last-wins.
type object struct {
	fields map[string]json.RawMessage
}

func decodeObject(raw json.RawMessage, allowed ...string) (object, error) {
	members, ok := ObjectMembers(raw)
	if !ok {
		return object{}, fmt.Errorf("%w: invalid type: expected a map", ErrDecode)
	}
	o := object{fields: make(map[string]json.RawMessage, len(members))}
	for _, m := range members {
		known := false
		for _, a := range allowed {
			if m.Key == a {
				known = true
				break
			}
		}
		if !known {
			quoted := make([]string, len(allowed))
			for i, a := range allowed {
				quoted[i] = "`" + a + "`"
			}
			if len(allowed) == 0 {
				return object{}, fmt.Errorf("%w: unknown field `%s`, there are no fields", ErrDecode, m.Key)
			}
			return object{}, fmt.Errorf("%w: unknown field `%s`, expected one of %s", ErrDecode, m.Key, strings.Join(quoted, ", "))
		}
		o.fields[m.Key] = trimSpace(m.Value)
	}
	return o, nil
}

func (o object) has(k string) bool { _, ok := o.fields[k]; return ok }

func (o object) isNull(k string) bool { return string(o.fields[k]) == "null" }

func missing(k string) error { return fmt.Errorf("%w: missing field `%s`", ErrDecode, k) }

func invalid(k, want string) error {
	return fmt.Errorf("%w: invalid type for `%s`: expected %s", ErrDecode, k, want)
}

// str decodes a required string field.
func (o object) str(k string) (string, error) {
	raw, ok := o.fields[k]
	if !ok {
		return "", missing(k)
	}
	s, ok := unquote(raw)
	if !ok {
		return "", invalid(k, "a string")
	}
	return s, nil
}

// optStr decodes an optional string that accepts null as absent.
func (o object) optStr(k string) (*string, error) {
	if !o.has(k) || o.isNull(k) {
		return nil, nil
	}
	s, err := o.str(k)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// generation decodes a Generation: 0..2^53-1, integral floats accepted.
func (o object) generation(k string) (int64, error) {
	raw, ok := o.fields[k]
	if !ok {
		return 0, missing(k)
	}
	return parseSafeInt(k, raw, 0)
}

// parseSafeInt accepts an integer (or integral float) in [min, 2^53-1].
func parseSafeInt(k string, raw json.RawMessage, min int64) (int64, error) {
	lit := string(raw)
	if lit == "" || !(lit[0] == '-' || (lit[0] >= '0' && lit[0] <= '9')) {
		return 0, invalid(k, "an integer")
	}
	var n int64
	if strings.ContainsAny(lit, ".eE") {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || f != math.Trunc(f) || f < float64(min) || f > MaxSafeInteger {
			return 0, fmt.Errorf("%w: invalid value for `%s`: expected an integer in %d..=%d", ErrDecode, k, min, int64(MaxSafeInteger))
		}
		n = int64(f)
	} else {
		v, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || v < min || v > MaxSafeInteger {
			return 0, fmt.Errorf("%w: invalid value for `%s`: expected an integer in %d..=%d", ErrDecode, k, min, int64(MaxSafeInteger))
		}
		n = v
	}
	return n, nil
}

// boundedString checks BoundedString256: 1..256 characters, no controls.
func boundedString(k, s string) error {
	n := utf8.RuneCountInString(s)
	if n == 0 || n > MaxBoundedString {
		return fmt.Errorf("%w: `%s` must be 1..%d characters", ErrDecode, k, MaxBoundedString)
	}
	if hasControl(s) {
		return fmt.Errorf("%w: `%s` must not contain control characters", ErrDecode, k)
	}
	return nil
}

// hasControl reports Unicode control characters (U+0000–U+001F,
// U+007F–U+009F).
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// HasControl reports whether s holds a Unicode control character.
func HasControl(s string) bool { return hasControl(s) }

func (o object) key(k string) (string, error) {
	s, err := o.str(k)
	if err != nil {
		return "", err
	}
	return s, boundedString(k, s)
}

func (o object) value(k string) (Value, error) {
	v, err := NormalizeValue(o.fields[k])
	if err != nil {
		return nil, fmt.Errorf("%w: `%s`: %v", ErrDecode, k, err)
	}
	return v, nil
}

// DecodeInitialize decodes initialize params.
func DecodeInitialize(raw json.RawMessage) (InitializeParams, error) {
	o, err := decodeObject(raw, "protocolVersion")
	if err != nil {
		return InitializeParams{}, err
	}
	v, err := o.str("protocolVersion")
	return InitializeParams{ProtocolVersion: v}, err
}

// DecodeGet decodes get params.
func DecodeGet(raw json.RawMessage) (GetParams, error) {
	o, err := decodeObject(raw, "atCursor")
	if err != nil {
		return GetParams{}, err
	}
	c, err := o.optStr("atCursor")
	return GetParams{AtCursor: c}, err
}

// DecodePlan decodes plan params.
func DecodePlan(raw json.RawMessage) (PlanParams, error) {
	o, err := decodeObject(raw, "graph")
	if err != nil {
		return PlanParams{}, err
	}
	if !o.has("graph") {
		return PlanParams{}, missing("graph")
	}
	return PlanParams{Graph: o.fields["graph"]}, nil
}

// DecodeApply decodes apply params (mode rules are the backend's).
func DecodeApply(raw json.RawMessage) (ApplyParams, error) {
	o, err := decodeObject(raw, "graph", "input", "dryRun", "ifGeneration", "idempotencyKey")
	if err != nil {
		return ApplyParams{}, err
	}
	var p ApplyParams
	if !o.has("graph") {
		return p, missing("graph")
	}
	p.Graph = o.fields["graph"]
	if o.has("input") {
		p.HasInput = true
		if p.Input, err = o.value("input"); err != nil {
			return p, err
		}
	}
	if o.has("dryRun") {
		switch string(o.fields["dryRun"]) {
		case "true":
			p.DryRun = true
		case "false":
		default:
			return p, invalid("dryRun", "a boolean")
		}
	}
	if o.has("ifGeneration") {
		g, err := o.generation("ifGeneration")
		if err != nil {
			return p, err
		}
		p.IfGeneration = &g
	}
	if o.has("idempotencyKey") {
		k, err := o.key("idempotencyKey")
		if err != nil {
			return p, err
		}
		p.IdempotencyKey = &k
	}
	return p, nil
}

// DecodeUpdate decodes update params.
func DecodeUpdate(raw json.RawMessage) (UpdateParams, error) {
	o, err := decodeObject(raw, "labels", "logLevel", "suspended", "ifGeneration", "idempotencyKey")
	if err != nil {
		return UpdateParams{}, err
	}
	var p UpdateParams
	if o.has("labels") {
		members, ok := ObjectMembers(o.fields["labels"])
		if !ok {
			return p, invalid("labels", "a map")
		}
		p.HasLabels = true
		p.Labels = make(map[string]string, len(members))
		for _, m := range members {
			if err := boundedString("labels key", m.Key); err != nil {
				return p, err
			}
			v, ok := unquote(m.Value)
			if !ok {
				return p, invalid("labels value", "a string")
			}
			if err := boundedString("labels value", v); err != nil {
				return p, err
			}
			p.Labels[m.Key] = v
		}
		if len(p.Labels) > MaxLabels {
			return p, fmt.Errorf("%w: `labels` must have at most %d entries", ErrDecode, MaxLabels)
		}
	}
	if o.has("logLevel") {
		l, err := o.str("logLevel")
		if err != nil {
			return p, err
		}
		ok := false
		for _, x := range LogLevels {
			ok = ok || x == l
		}
		if !ok {
			return p, fmt.Errorf("%w: unknown variant `%s`, expected one of `trace`, `debug`, `info`, `warn`, `error`", ErrDecode, l)
		}
		p.LogLevel = &l
	}
	if o.has("suspended") {
		switch string(o.fields["suspended"]) {
		case "true":
			t := true
			p.Suspended = &t
		case "false":
			f := false
			p.Suspended = &f
		default:
			return p, invalid("suspended", "a boolean")
		}
	}
	if p.IfGeneration, err = o.generation("ifGeneration"); err != nil {
		return p, err
	}
	if p.IdempotencyKey, err = o.key("idempotencyKey"); err != nil {
		return p, err
	}
	if !p.HasLabels && p.LogLevel == nil && p.Suspended == nil {
		return p, fmt.Errorf("%w: update requires at least one of labels, logLevel, or suspended", ErrDecode)
	}
	return p, nil
}

// DecodeStop decodes stop params.
func DecodeStop(raw json.RawMessage) (StopParams, error) {
	o, err := decodeObject(raw, "mode", "ifGeneration", "idempotencyKey")
	if err != nil {
		return StopParams{}, err
	}
	var p StopParams
	if p.Mode, err = o.str("mode"); err != nil {
		return p, err
	}
	if p.Mode != "drain" && p.Mode != "force" {
		return p, fmt.Errorf("%w: unknown variant `%s`, expected `drain` or `force`", ErrDecode, p.Mode)
	}
	if p.IfGeneration, err = o.generation("ifGeneration"); err != nil {
		return p, err
	}
	p.IdempotencyKey, err = o.key("idempotencyKey")
	return p, err
}

// DecodeRetry decodes retry params.
func DecodeRetry(raw json.RawMessage) (RetryParams, error) {
	o, err := decodeObject(raw, "ifGeneration", "idempotencyKey")
	if err != nil {
		return RetryParams{}, err
	}
	var p RetryParams
	if p.IfGeneration, err = o.generation("ifGeneration"); err != nil {
		return p, err
	}
	p.IdempotencyKey, err = o.key("idempotencyKey")
	return p, err
}

// DecodeResubmit decodes resubmit params.
func DecodeResubmit(raw json.RawMessage) (ResubmitParams, error) {
	o, err := decodeObject(raw, "ifGeneration", "ifRunId", "idempotencyKey", "replacementInput")
	if err != nil {
		return ResubmitParams{}, err
	}
	var p ResubmitParams
	if p.IfGeneration, err = o.generation("ifGeneration"); err != nil {
		return p, err
	}
	if p.IfRunID, err = o.str("ifRunId"); err != nil {
		return p, err
	}
	if p.IdempotencyKey, err = o.key("idempotencyKey"); err != nil {
		return p, err
	}
	if o.has("replacementInput") {
		p.HasReplacement = true
		if p.ReplacementInput, err = o.value("replacementInput"); err != nil {
			return p, err
		}
	}
	return p, nil
}

// DecodeDelete decodes delete params.
func DecodeDelete(raw json.RawMessage) (DeleteParams, error) {
	o, err := decodeObject(raw, "ifGeneration", "ifRunId", "idempotencyKey")
	if err != nil {
		return DeleteParams{}, err
	}
	var p DeleteParams
	if p.IfGeneration, err = o.generation("ifGeneration"); err != nil {
		return p, err
	}
	if p.IfRunID, err = o.optStr("ifRunId"); err != nil {
		return p, err
	}
	p.IdempotencyKey, err = o.key("idempotencyKey")
	return p, err
}

// DecodeWatch decodes watch params.
func DecodeWatch(raw json.RawMessage) (WatchParams, error) {
	o, err := decodeObject(raw, "runId", "fromCursor")
	if err != nil {
		return WatchParams{}, err
	}
	var p WatchParams
	if p.RunID, err = o.optStr("runId"); err != nil {
		return p, err
	}
	p.FromCursor, err = o.optStr("fromCursor")
	return p, err
}

// DecodeLogs decodes logs params (exactly {}).
func DecodeLogs(raw json.RawMessage) (LogsParams, error) {
	_, err := decodeObject(raw)
	return LogsParams{}, err
}

// DecodeAgentAttach decodes agent/attach params.
func DecodeAgentAttach(raw json.RawMessage) (AgentAttachParams, error) {
	o, err := decodeObject(raw, "execution")
	if err != nil {
		return AgentAttachParams{}, err
	}
	e, err := o.str("execution")
	if err != nil {
		return AgentAttachParams{}, err
	}
	if err := ValidExecutionRef(e); err != nil {
		return AgentAttachParams{}, err
	}
	return AgentAttachParams{Execution: e}, nil
}

// ValidExecutionRef checks an ExecutionRef: 1..128 bytes, no controls.
func ValidExecutionRef(e string) error {
	if len(e) == 0 || len(e) > MaxExecutionRefBytes || hasControl(e) || !utf8.ValidString(e) {
		return fmt.Errorf("%w: `execution` must be 1..%d bytes without control characters", ErrDecode, MaxExecutionRefBytes)
	}
	return nil
}

// DecodeRun decodes the params of a native-v2 run/* method.
func DecodeRun(method string, raw json.RawMessage) (RunParams, error) {
	var p RunParams
	var o object
	var err error
	switch method {
	case MethodRunList:
		_, err = decodeObject(raw)
		return p, err
	case MethodRunSubmit:
		o, err = decodeObject(raw, "runId", "submission")
	case MethodRunStatus, MethodRunForce:
		o, err = decodeObject(raw, "runId")
	case MethodRunWatch:
		o, err = decodeObject(raw, "runId", "fromCursor")
	case MethodRunLogs:
		o, err = decodeObject(raw, "runId", "fromCursor", "execution")
	case MethodRunAttach:
		o, err = decodeObject(raw, "runId", "execution")
	default:
		return p, fmt.Errorf("%w: not a run method", ErrDecode)
	}
	if err != nil {
		return p, err
	}
	if p.RunID, err = o.str("runId"); err != nil {
		return p, err
	}
	switch method {
	case MethodRunSubmit:
		if _, ok := ObjectMembers(o.fields["submission"]); !ok {
			return p, invalid("submission", "an object")
		}
		p.Submission = o.fields["submission"]
	case MethodRunWatch, MethodRunLogs:
		if p.FromCursor, err = o.optStr("fromCursor"); err != nil {
			return p, err
		}
		if method == MethodRunLogs {
			p.Execution, err = o.optStr("execution")
		}
	case MethodRunAttach:
		e, err := o.str("execution")
		if err != nil {
			return p, err
		}
		p.Execution = &e
	}
	return p, err
}
