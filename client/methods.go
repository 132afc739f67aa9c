package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/oecp/oecp/protocol"
)

// Params of the v1 methods as they go on the wire. Optional members are
// omitted when zero unless a comment says otherwise.

// GetParams are get's params.
type GetParams struct {
	AtCursor string `json:"atCursor,omitempty"`
}

// ApplyParams are apply's params. A committed apply without an
// IdempotencyKey gets a random one (NewIdempotencyKey).
type ApplyParams struct {
	Graph json.RawMessage `json:"graph"`
	// Input is the run's root input as JSON; nil omits it, and
	// json.RawMessage("null") sends an explicit null.
	Input          json.RawMessage `json:"input,omitempty"`
	DryRun         bool            `json:"dryRun,omitempty"`
	IfGeneration   *int64          `json:"ifGeneration,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
}

// UpdateParams are update's params.
type UpdateParams struct {
	// Labels, when non-nil (even empty), replaces the whole label map.
	Labels         map[string]string
	LogLevel       string // "" leaves it
	Suspended      *bool
	IfGeneration   int64
	IdempotencyKey string
}

// MarshalJSON writes labels whenever the map is non-nil, so an empty map
// clears the labels.
func (p UpdateParams) MarshalJSON() ([]byte, error) {
	m := map[string]any{"ifGeneration": p.IfGeneration, "idempotencyKey": p.IdempotencyKey}
	if p.Labels != nil {
		m["labels"] = p.Labels
	}
	if p.LogLevel != "" {
		m["logLevel"] = p.LogLevel
	}
	if p.Suspended != nil {
		m["suspended"] = *p.Suspended
	}
	return json.Marshal(m)
}

// StopParams are stop's params. Mode is "drain" or "force".
type StopParams struct {
	Mode           string `json:"mode"`
	IfGeneration   int64  `json:"ifGeneration"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// RetryParams are retry's params.
type RetryParams struct {
	IfGeneration   int64  `json:"ifGeneration"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// ResubmitParams are resubmit's params.
type ResubmitParams struct {
	IfGeneration   int64  `json:"ifGeneration"`
	IfRunID        string `json:"ifRunId"`
	IdempotencyKey string `json:"idempotencyKey"`
	// ReplacementInput: nil reuses the prior run's input; "null" is an
	// explicit null input.
	ReplacementInput json.RawMessage `json:"replacementInput,omitempty"`
}

// DeleteParams are delete's params. IfRunID "" asserts there is no
// current run (sent as absent).
type DeleteParams struct {
	IfGeneration   int64  `json:"ifGeneration"`
	IfRunID        string `json:"ifRunId,omitempty"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// WatchParams are watch's params; "" omits a member.
type WatchParams struct {
	RunID      string `json:"runId,omitempty"`
	FromCursor string `json:"fromCursor,omitempty"`
}

// WatchEvent is one watch event notification.
type WatchEvent struct {
	SubscriptionID string              `json:"subscriptionId"`
	RunID          string              `json:"runId"`
	Cursor         string              `json:"cursor"`
	Event          protocol.WatchEvent `json:"event"`
	// Raw is the notification's params as received.
	Raw json.RawMessage `json:"-"`
}

// LogEvent is one logs notification.
type LogEvent struct {
	SubscriptionID string             `json:"subscriptionId"`
	Record         protocol.LogRecord `json:"record"`
	Raw            json.RawMessage    `json:"-"`
}

// AttachEvent is one agent/attach notification.
type AttachEvent struct {
	SubscriptionID string               `json:"subscriptionId"`
	Event          protocol.AttachEvent `json:"event"`
	Raw            json.RawMessage      `json:"-"`
}

// NewIdempotencyKey returns a fresh random idempotency key.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "oecp-" + hex.EncodeToString(b[:])
}

func orNewKey(k string) string {
	if k == "" {
		return NewIdempotencyKey()
	}
	return k
}

// Initialize negotiates protocol version v1.
func (c *Conn) Initialize(ctx context.Context) (*protocol.InitializeResult, error) {
	var r protocol.InitializeResult
	err := c.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{ProtocolVersion: protocol.Version}, &r)
	return ret(&r, err)
}

// Get reads the cluster.
func (c *Conn) Get(ctx context.Context, p GetParams) (*protocol.GetResult, error) {
	var r protocol.GetResult
	return ret(&r, c.Call(ctx, protocol.MethodGet, p, &r))
}

// Plan verifies graph (a GraphSpec as JSON) without admitting it.
func (c *Conn) Plan(ctx context.Context, graph json.RawMessage) (*protocol.PlanResult, error) {
	var r protocol.PlanResult
	return ret(&r, c.Call(ctx, protocol.MethodPlan, map[string]json.RawMessage{"graph": graph}, &r))
}

// Apply admits a graph (or, with DryRun, diffs it).
func (c *Conn) Apply(ctx context.Context, p ApplyParams) (*protocol.ApplyResult, error) {
	if !p.DryRun {
		p.IdempotencyKey = orNewKey(p.IdempotencyKey)
	}
	var r protocol.ApplyResult
	return ret(&r, c.Call(ctx, protocol.MethodApply, p, &r))
}

// Update changes labels, log level or suspension of the current run.
func (c *Conn) Update(ctx context.Context, p UpdateParams) (*protocol.UpdateResult, error) {
	return mutate[protocol.UpdateResult](ctx, c, protocol.MethodUpdate, &p, &p.IdempotencyKey)
}

// Stop stops the current run.
func (c *Conn) Stop(ctx context.Context, p StopParams) (*protocol.StopResult, error) {
	return mutate[protocol.StopResult](ctx, c, protocol.MethodStop, &p, &p.IdempotencyKey)
}

// Retry reserves a retry of the latest failed frontier.
func (c *Conn) Retry(ctx context.Context, p RetryParams) (*protocol.RetryResult, error) {
	return mutate[protocol.RetryResult](ctx, c, protocol.MethodRetry, &p, &p.IdempotencyKey)
}

// Resubmit starts a new run of the finished graph.
func (c *Conn) Resubmit(ctx context.Context, p ResubmitParams) (*protocol.ResubmitResult, error) {
	return mutate[protocol.ResubmitResult](ctx, c, protocol.MethodResubmit, &p, &p.IdempotencyKey)
}

// Delete deletes the finished (or empty) cluster.
func (c *Conn) Delete(ctx context.Context, p DeleteParams) (*protocol.DeleteResult, error) {
	return mutate[protocol.DeleteResult](ctx, c, protocol.MethodDelete, &p, &p.IdempotencyKey)
}

// Watch subscribes to a run's events (the current run when p.RunID is
// empty), replaying history strictly after p.FromCursor.
func (c *Conn) Watch(ctx context.Context, p WatchParams) (*Subscription[WatchEvent], *protocol.WatchResult, error) {
	sub, raw, err := subscribe(c, c.establisher(ctx, protocol.MethodWatch, p), decodeWatch)
	if err != nil {
		return nil, nil, err
	}
	var r protocol.WatchResult
	if err := json.Unmarshal(raw, &r); err != nil {
		_ = sub.Close()
		return nil, nil, err
	}
	return sub, &r, nil
}

// Logs subscribes to the cluster's live log records.
func (c *Conn) Logs(ctx context.Context) (*Subscription[LogEvent], error) {
	sub, _, err := subscribe(c, c.establisher(ctx, protocol.MethodLogs, struct{}{}), decodeLog)
	return sub, err
}

// AgentAttach subscribes to the live output of one execution.
func (c *Conn) AgentAttach(ctx context.Context, execution string) (*Subscription[AttachEvent], error) {
	sub, _, err := subscribe(c, c.establisher(ctx, protocol.MethodAgentAttach, map[string]string{"execution": execution}), decodeAttach)
	return sub, err
}

// Subscribe establishes any subscription method (for example a native-v2
// run/watch) and delivers each event's raw params; it also returns the raw
// establishment result.
func (c *Conn) Subscribe(ctx context.Context, method string, params any) (*Subscription[json.RawMessage], json.RawMessage, error) {
	return subscribe(c, c.establisher(ctx, method, params), func(raw json.RawMessage) (json.RawMessage, string, error) {
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(raw, &p)
		return raw, p.Cursor, nil
	})
}

func (c *Conn) establisher(ctx context.Context, method string, params any) func(func(json.RawMessage) (subscriber, error)) (response, error) {
	return func(est func(json.RawMessage) (subscriber, error)) (response, error) {
		return c.roundTrip(ctx, method, params, est)
	}
}

func decodeWatch(raw json.RawMessage) (WatchEvent, string, error) {
	var e WatchEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, "", err
	}
	if e.Cursor == "" || e.Event.Type == "" {
		return e, "", errors.New("watch event without cursor or type")
	}
	e.Raw = append(json.RawMessage(nil), raw...)
	return e, e.Cursor, nil
}

func decodeLog(raw json.RawMessage) (LogEvent, string, error) {
	var e LogEvent
	err := json.Unmarshal(raw, &e)
	e.Raw = append(json.RawMessage(nil), raw...)
	return e, "", err
}

func decodeAttach(raw json.RawMessage) (AttachEvent, string, error) {
	var e AttachEvent
	err := json.Unmarshal(raw, &e)
	e.Raw = append(json.RawMessage(nil), raw...)
	return e, "", err
}

// mutate sends a mutating method, first filling *key (the params'
// idempotency key) with a fresh key when it is empty.
func mutate[R any](ctx context.Context, c *Conn, method string, params any, key *string) (*R, error) {
	*key = orNewKey(*key)
	var r R
	return ret(&r, c.Call(ctx, method, params, &r))
}

func ret[T any](r *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
