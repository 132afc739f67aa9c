package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/oecp/oecp/protocol"
)

// The native run methods (run/*). Their params and results are the
// protocol's RunSubmitParams … RunStatusResult; cursors are opaque strings
// and "" omits an optional member.

// RunSubmission is a RunSubmission as it goes on the wire, members in
// protocol order. Graph, InitialInput and Runtime are JSON as given (the
// server decodes them strictly); InitialInput must not be empty (send
// json.RawMessage("null") for a null input).
type RunSubmission struct {
	Title         string          `json:"title"`
	Graph         json.RawMessage `json:"graph"`
	InitialInput  json.RawMessage `json:"initialInput"`
	Runtime       json.RawMessage `json:"runtime"`
	Source        RunSource       `json:"source"`
	SubmissionKey string          `json:"submissionKey"`
}

// RunSource is the repository snapshot a run works on: "owner/name", a
// branch and a 40-hex revision.
type RunSource struct {
	Repository string `json:"repository"`
	Branch     string `json:"branch"`
	Revision   string `json:"revision"`
}

// RunSubmitParams are run/submit's params. Submission is the encoded
// RunSubmission (see RunSubmission).
type RunSubmitParams struct {
	RunID      string          `json:"runId"`
	Submission json.RawMessage `json:"submission"`
}

// RunSubmitResult is run/submit's result: the run the submission is
// recorded under (an earlier run when its submission key was used before
// for the same submission).
type RunSubmitResult struct {
	RunID string `json:"runId"`
}

// RunStatusResult is run/status's and run/force's result, and one entry
// of run/list.
type RunStatusResult struct {
	RunID    string    `json:"runId"`
	Title    string    `json:"title"`
	Source   RunSource `json:"source"`
	Size     string    `json:"size"`
	AtCursor string    `json:"atCursor"`
	Status   RunStatus `json:"status"`
}

// RunStatus is a run's public phase: admitted; running or stopping with
// every active execution; finished with its terminal result.
type RunStatus struct {
	Phase            string                   `json:"phase"`
	ActiveExecutions []RunExecution           `json:"activeExecutions,omitempty"`
	TerminalResult   *protocol.TerminalResult `json:"terminalResult,omitempty"`
}

// RunExecution is one active execution: the ref run/logs and run/attach
// take, and its node.
type RunExecution struct {
	Execution string `json:"execution"`
	Node      string `json:"node"`
}

// RunListResult is run/list's result: the tenant's runs, newest first.
type RunListResult struct {
	Runs []RunStatusResult `json:"runs"`
}

// RunHarnessesResult is run/harnesses' answer: the server's harness
// entries.
type RunHarnessesResult = protocol.RunHarnessesResult

// RunHarness is one harness entry a server offers.
type RunHarness = protocol.RunHarness

// RunWatchParams are run/watch's params: FromCursor replays strictly
// after it ("" from the run's first record).
type RunWatchParams struct {
	RunID      string `json:"runId"`
	FromCursor string `json:"fromCursor,omitempty"`
}

// RunLogsParams are run/logs's params; Execution keeps only that
// execution's records.
type RunLogsParams struct {
	RunID      string `json:"runId"`
	FromCursor string `json:"fromCursor,omitempty"`
	Execution  string `json:"execution,omitempty"`
}

// RunSubscribeResult is the result of run/watch and run/logs (AtCursor:
// where the stream starts, strictly after) and of run/attach (Execution).
type RunSubscribeResult struct {
	SubscriptionID string `json:"subscriptionId"`
	RunID          string `json:"runId"`
	AtCursor       string `json:"atCursor,omitempty"`
	Execution      string `json:"execution,omitempty"`
}

// RunEventHead begins every run/* event.
type RunEventHead struct {
	SubscriptionID string `json:"subscriptionId"`
	RunID          string `json:"runId"`
	// Raw is the notification's params as received.
	Raw json.RawMessage `json:"-"`
}

// RunWatchEvent is one run/watch event: the run's status after one record.
type RunWatchEvent struct {
	RunEventHead
	Title  string    `json:"title"`
	Source RunSource `json:"source"`
	Size   string    `json:"size"`
	Cursor string    `json:"cursor"`
	Status RunStatus `json:"status"`
}

func (e *RunWatchEvent) cursor() string { return e.Cursor }

// RunLogEvent is one run/logs event. Execution is "" for a run-wide
// record.
type RunLogEvent struct {
	RunEventHead
	Cursor    string             `json:"cursor"`
	Execution string             `json:"execution,omitempty"`
	Record    protocol.LogRecord `json:"record"`
}

func (e *RunLogEvent) cursor() string { return e.Cursor }

// RunAttachEvent is one run/attach event: live output of one execution.
type RunAttachEvent struct {
	RunEventHead
	Execution string               `json:"execution"`
	Event     protocol.AttachEvent `json:"event"`
}

func (e *RunAttachEvent) cursor() string { return "" }

func (h *RunEventHead) keep(raw json.RawMessage) { h.Raw = raw }

// runEvent is a run/* event that keeps its raw params and names its
// cursor ("" for attach events).
type runEvent[E any] interface {
	*E
	keep(raw json.RawMessage)
	cursor() string
}

// RunSubmit admits a submission as run p.RunID.
func (c *Conn) RunSubmit(ctx context.Context, p RunSubmitParams) (*RunSubmitResult, error) {
	var r RunSubmitResult
	return ret(&r, c.Call(ctx, protocol.MethodRunSubmit, p, &r))
}

// RunList lists the caller's runs, newest first.
func (c *Conn) RunList(ctx context.Context) (*RunListResult, error) {
	var r RunListResult
	return ret(&r, c.Call(ctx, protocol.MethodRunList, struct{}{}, &r))
}

// RunHarnesses lists the harness entries the server offers. A server
// that predates the method answers -32601 (MethodNotFound).
func (c *Conn) RunHarnesses(ctx context.Context) (*RunHarnessesResult, error) {
	var r RunHarnessesResult
	return ret(&r, c.Call(ctx, protocol.MethodRunHarnesses, struct{}{}, &r))
}

// RunStatus reads one run.
func (c *Conn) RunStatus(ctx context.Context, runID string) (*RunStatusResult, error) {
	var r RunStatusResult
	return ret(&r, c.Call(ctx, protocol.MethodRunStatus, map[string]string{"runId": runID}, &r))
}

// RunForce stops a run: the result is its status where the force request
// was recorded (or, for a finished run, its current status).
func (c *Conn) RunForce(ctx context.Context, runID string) (*RunStatusResult, error) {
	var r RunStatusResult
	return ret(&r, c.Call(ctx, protocol.MethodRunForce, map[string]string{"runId": runID}, &r))
}

// RunWatch subscribes to a run's status after each of its records,
// replaying them after p.FromCursor. The server closes it (done) after the
// terminal record.
func (c *Conn) RunWatch(ctx context.Context, p RunWatchParams) (*Subscription[RunWatchEvent], *RunSubscribeResult, error) {
	return runSubscribe[RunWatchEvent](ctx, c, protocol.MethodRunWatch, p)
}

// RunLogs subscribes to a run's durable log records, replaying them after
// p.FromCursor. The server closes it (done) after the run's terminal
// record.
func (c *Conn) RunLogs(ctx context.Context, p RunLogsParams) (*Subscription[RunLogEvent], *RunSubscribeResult, error) {
	return runSubscribe[RunLogEvent](ctx, c, protocol.MethodRunLogs, p)
}

// RunAttach subscribes to the live output of one active execution.
func (c *Conn) RunAttach(ctx context.Context, runID, execution string) (*Subscription[RunAttachEvent], *RunSubscribeResult, error) {
	return runSubscribe[RunAttachEvent](ctx, c, protocol.MethodRunAttach, map[string]string{"runId": runID, "execution": execution})
}

// runSubscribe establishes a run/* subscription with its typed events.
func runSubscribe[E any, P runEvent[E]](ctx context.Context, c *Conn, method string, params any) (*Subscription[E], *RunSubscribeResult, error) {
	sub, raw, err := subscribe(c, c.establisher(ctx, method, params), func(raw json.RawMessage) (E, string, error) {
		var e E
		err := json.Unmarshal(raw, &e)
		P(&e).keep(append(json.RawMessage(nil), raw...))
		return e, P(&e).cursor(), err
	})
	if err != nil {
		return nil, nil, err
	}
	var r RunSubscribeResult
	if err := json.Unmarshal(raw, &r); err != nil {
		_ = sub.Close()
		return nil, nil, err
	}
	return sub, &r, nil
}

// NewRunID returns a fresh run id: a UUIDv7 in its canonical lowercase
// form (8-4-4-4-12 hex digits), whose first 48 bits are the Unix time in
// milliseconds. It satisfies the server's run id rule (1..128 of
// [A-Za-z0-9._-], starting with a letter or digit, never run-<digits>).
func NewRunID() string { return newRunID(time.Now()) }

func newRunID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	ms := uint64(now.UnixMilli())
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // RFC 9562 variant
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// RunIDTime is the time a NewRunID id was minted, read from its first 48
// bits; ok is false for an id that is not a UUIDv7.
func RunIDTime(id string) (t time.Time, ok bool) { return protocol.RunIDTime(id) }
