package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Typed params of every method. All params objects are closed: unknown
// keys fail decoding. Nested duplicate keys collapse
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

// DecodeInitialize decodes initialize params.
func DecodeInitialize(raw json.RawMessage) (InitializeParams, error) {
	o := decodeObject(raw, "protocolVersion")
	return InitializeParams{ProtocolVersion: o.str("protocolVersion")}, o.err
}

// DecodeGet decodes get params.
func DecodeGet(raw json.RawMessage) (GetParams, error) {
	o := decodeObject(raw, "atCursor")
	return GetParams{AtCursor: o.optStr("atCursor")}, o.err
}

// DecodePlan decodes plan params.
func DecodePlan(raw json.RawMessage) (PlanParams, error) {
	o := decodeObject(raw, "graph")
	return PlanParams{Graph: o.raw("graph")}, o.err
}

// DecodeApply decodes apply params (mode rules are the backend's).
func DecodeApply(raw json.RawMessage) (ApplyParams, error) {
	o := decodeObject(raw, "graph", "input", "dryRun", "ifGeneration", "idempotencyKey")
	p := ApplyParams{Graph: o.raw("graph"), HasInput: o.has("input")}
	if p.HasInput {
		p.Input = o.value("input")
	}
	p.DryRun = o.has("dryRun") && o.boolean("dryRun")
	p.IfGeneration = opt(o, "ifGeneration", o.generation)
	p.IdempotencyKey = opt(o, "idempotencyKey", o.key)
	return p, o.err
}

// DecodeUpdate decodes update params.
func DecodeUpdate(raw json.RawMessage) (UpdateParams, error) {
	o := decodeObject(raw, "labels", "logLevel", "suspended", "ifGeneration", "idempotencyKey")
	var p UpdateParams
	if p.HasLabels = o.has("labels"); p.HasLabels {
		p.Labels = o.labels("labels")
	}
	p.LogLevel = opt(o, "logLevel", func(k string) string {
		return o.oneOf(k, "one of `trace`, `debug`, `info`, `warn`, `error`", LogLevels...)
	})
	p.Suspended = opt(o, "suspended", o.boolean)
	p.IfGeneration = o.generation("ifGeneration")
	p.IdempotencyKey = o.key("idempotencyKey")
	if o.err == nil && !p.HasLabels && p.LogLevel == nil && p.Suspended == nil {
		o.fail(fmt.Errorf("%w: update requires at least one of labels, logLevel, or suspended", ErrDecode))
	}
	return p, o.err
}

// DecodeStop decodes stop params.
func DecodeStop(raw json.RawMessage) (StopParams, error) {
	o := decodeObject(raw, "mode", "ifGeneration", "idempotencyKey")
	return StopParams{
		Mode:           o.oneOf("mode", "`drain` or `force`", "drain", "force"),
		IfGeneration:   o.generation("ifGeneration"),
		IdempotencyKey: o.key("idempotencyKey"),
	}, o.err
}

// DecodeRetry decodes retry params.
func DecodeRetry(raw json.RawMessage) (RetryParams, error) {
	o := decodeObject(raw, "ifGeneration", "idempotencyKey")
	return RetryParams{IfGeneration: o.generation("ifGeneration"), IdempotencyKey: o.key("idempotencyKey")}, o.err
}

// DecodeResubmit decodes resubmit params.
func DecodeResubmit(raw json.RawMessage) (ResubmitParams, error) {
	o := decodeObject(raw, "ifGeneration", "ifRunId", "idempotencyKey", "replacementInput")
	p := ResubmitParams{IfGeneration: o.generation("ifGeneration"), IfRunID: o.str("ifRunId"), IdempotencyKey: o.key("idempotencyKey")}
	if p.HasReplacement = o.has("replacementInput"); p.HasReplacement {
		p.ReplacementInput = o.value("replacementInput")
	}
	return p, o.err
}

// DecodeDelete decodes delete params.
func DecodeDelete(raw json.RawMessage) (DeleteParams, error) {
	o := decodeObject(raw, "ifGeneration", "ifRunId", "idempotencyKey")
	return DeleteParams{IfGeneration: o.generation("ifGeneration"), IfRunID: o.optStr("ifRunId"), IdempotencyKey: o.key("idempotencyKey")}, o.err
}

// DecodeWatch decodes watch params.
func DecodeWatch(raw json.RawMessage) (WatchParams, error) {
	o := decodeObject(raw, "runId", "fromCursor")
	return WatchParams{RunID: o.optStr("runId"), FromCursor: o.optStr("fromCursor")}, o.err
}

// DecodeLogs decodes logs params (exactly {}).
func DecodeLogs(raw json.RawMessage) (LogsParams, error) {
	return LogsParams{}, decodeObject(raw).err
}

// DecodeAgentAttach decodes agent/attach params.
func DecodeAgentAttach(raw json.RawMessage) (AgentAttachParams, error) {
	o := decodeObject(raw, "execution")
	e := o.str("execution")
	if o.err == nil {
		o.fail(ValidExecutionRef(e))
	}
	return AgentAttachParams{Execution: e}, o.err
}

// ValidExecutionRef checks an ExecutionRef: 1..128 bytes, no controls.
func ValidExecutionRef(e string) error {
	if len(e) == 0 || len(e) > MaxExecutionRefBytes || HasControl(e) || !utf8.ValidString(e) {
		return fmt.Errorf("%w: `execution` must be 1..%d bytes without control characters", ErrDecode, MaxExecutionRefBytes)
	}
	return nil
}

// runMembers lists the params members of each native-v2 run/* method.
var runMembers = map[string][]string{
	MethodRunList:      {},
	MethodRunHarnesses: {},
	MethodRunSubmit:    {"runId", "submission"},
	MethodRunStatus:    {"runId"},
	MethodRunForce:     {"runId"},
	MethodRunWatch:     {"runId", "fromCursor"},
	MethodRunLogs:      {"runId", "fromCursor", "execution"},
	MethodRunAttach:    {"runId", "execution"},
}

// DecodeRun decodes the params of a native-v2 run/* method.
func DecodeRun(method string, raw json.RawMessage) (RunParams, error) {
	allowed, ok := runMembers[method]
	if !ok {
		return RunParams{}, fmt.Errorf("%w: not a run method", ErrDecode)
	}
	o := decodeObject(raw, allowed...)
	if method == MethodRunList || method == MethodRunHarnesses {
		return RunParams{}, o.err
	}
	p := RunParams{RunID: o.str("runId")}
	switch method {
	case MethodRunSubmit:
		// A missing submission is reported as not an object.
		p.Submission = o.fields["submission"]
		if _, ok := ObjectMembers(p.Submission); !ok {
			o.fail(invalid("submission", "an object"))
		}
	case MethodRunWatch, MethodRunLogs:
		p.FromCursor = o.optStr("fromCursor")
		if method == MethodRunLogs {
			p.Execution = o.optStr("execution")
		}
	case MethodRunAttach:
		e := o.str("execution")
		p.Execution = &e
	}
	return p, o.err
}
