package protocol

import "encoding/json"

// Result and event types, declared in the reference's key order. Encode
// them with Marshal. Fields that are omitted when unset
// are pointers or slices with omitempty; fields that are written as null
// are plain pointers without omitempty.

// Phases of a cluster.
const (
	PhaseEmpty     = "empty"
	PhaseAdmitting = "admitting"
	PhaseRunning   = "running"
	PhaseFinished  = "finished"
	PhaseDeleting  = "deleting"
)

// Dispatch states of a run.
const (
	DispatchActive        = "active"
	DispatchSuspended     = "suspended"
	DispatchDraining      = "draining"
	DispatchForceStopping = "force_stopping"
	DispatchStopped       = "stopped"
)

// OperationalStatus is the lifecycle part of ClusterStatus.
type OperationalStatus struct {
	Labels        map[string]string `json:"labels"`
	LogLevel      string            `json:"logLevel"`
	DispatchState string            `json:"dispatchState"`
	StopMode      string            `json:"stopMode,omitempty"`
	InFlight      uint32            `json:"inFlight"`
}

// ClusterStatus is the status block of get, initialize and events.
type ClusterStatus struct {
	Phase              string             `json:"phase"`
	ObservedGeneration *int64             `json:"observedGeneration"`
	CurrentRunID       *string            `json:"currentRunId"`
	AtCursor           *string            `json:"atCursor"`
	Operational        *OperationalStatus `json:"operational,omitempty"`
}

// EmptyStatus is the status of a cluster with nothing admitted.
func EmptyStatus() ClusterStatus { return ClusterStatus{Phase: PhaseEmpty} }

// Capabilities are what initialize advertises.
type Capabilities struct {
	GraphProfiles []string `json:"graphProfiles"`
	Logs          bool     `json:"logs"`
	AgentAttach   bool     `json:"agentAttach"`
}

// InitializeResult is initialize's result.
type InitializeResult struct {
	ProtocolVersion string        `json:"protocolVersion"`
	Capabilities    Capabilities  `json:"capabilities"`
	Status          ClusterStatus `json:"status"`
}

// TerminalResult is how a finished run ended.
type TerminalResult struct {
	Status string `json:"status"`
	Output *Value `json:"output,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// GetResult is get's result. Spec is the encoded GraphSpec or nil (null).
// A backend may encode one once (Encode) and answer every get with it
// until its state changes; such a result is shared and must not be
// modified.
type GetResult struct {
	Spec           json.RawMessage `json:"spec"`
	Status         ClusterStatus   `json:"status"`
	AtCursor       *string         `json:"atCursor"`
	TerminalResult *TerminalResult `json:"terminalResult,omitempty"`

	encoded []byte
}

// Encoded is a result that carries its own encoding, made once and
// written as is by every answer that shares it.
type Encoded interface {
	// EncodedJSON returns the encoding, or nil when there is none.
	EncodedJSON() []byte
}

// Encode stores r's encoding in r, for EncodedJSON.
func (r *GetResult) Encode() error {
	r.encoded = nil
	b, err := Marshal(r)
	r.encoded = b
	return err
}

// EncodedJSON returns the encoding Encode stored, or nil.
func (r *GetResult) EncodedJSON() []byte { return r.encoded }

// PlanResult is plan's result. Diagnostics and Bounds are encoded JSON.
type PlanResult struct {
	OK          bool            `json:"ok"`
	Diagnostics json.RawMessage `json:"diagnostics"`
	Bounds      json.RawMessage `json:"bounds,omitempty"`
}

// GraphDiff is the node diff of a dry-run apply.
type GraphDiff struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
}

// ApplyResult is apply's result.
type ApplyResult struct {
	Generation *int64     `json:"generation"`
	RunID      *string    `json:"runId"`
	Phase      string     `json:"phase"`
	Deduped    bool       `json:"deduped"`
	Diff       *GraphDiff `json:"diff,omitempty"`
}

// UpdateResult is update's result.
type UpdateResult struct {
	Generation  int64             `json:"generation"`
	RunID       string            `json:"runId"`
	Phase       string            `json:"phase"`
	Operational OperationalStatus `json:"operational"`
	AtCursor    string            `json:"atCursor"`
	Deduped     bool              `json:"deduped"`
}

// StopResult is stop's result.
type StopResult struct {
	Generation    int64             `json:"generation"`
	RunID         string            `json:"runId"`
	Phase         string            `json:"phase"`
	AcceptedMode  string            `json:"acceptedMode"`
	EffectiveMode string            `json:"effectiveMode"`
	Operational   OperationalStatus `json:"operational"`
	AtCursor      string            `json:"atCursor"`
	Deduped       bool              `json:"deduped"`
}

// RetryResult is retry's result.
type RetryResult struct {
	Generation    int64             `json:"generation"`
	RunID         string            `json:"runId"`
	Phase         string            `json:"phase"`
	RetriedTurnID string            `json:"retriedTurnId"`
	RetryTurnID   string            `json:"retryTurnId"`
	Operational   OperationalStatus `json:"operational"`
	AtCursor      string            `json:"atCursor"`
	Deduped       bool              `json:"deduped"`
}

// ResubmitResult is resubmit's result.
type ResubmitResult struct {
	Generation  int64             `json:"generation"`
	PriorRunID  string            `json:"priorRunId"`
	RunID       string            `json:"runId"`
	Phase       string            `json:"phase"`
	Operational OperationalStatus `json:"operational"`
	AtCursor    string            `json:"atCursor"`
	Deduped     bool              `json:"deduped"`
}

// DeleteResult is delete's result.
type DeleteResult struct {
	Deleted    bool    `json:"deleted"`
	Phase      string  `json:"phase"`
	Generation *int64  `json:"generation,omitempty"`
	RunID      *string `json:"runId,omitempty"`
	AtCursor   *string `json:"atCursor,omitempty"`
	Deduped    bool    `json:"deduped"`
}

// WatchResult is watch's establishment result.
type WatchResult struct {
	SubscriptionID string  `json:"subscriptionId"`
	RunID          *string `json:"runId"`
	AtCursor       *string `json:"atCursor"`
}

// SubscriptionResult is the establishment result of logs and agent/attach.
type SubscriptionResult struct {
	SubscriptionID string `json:"subscriptionId"`
}

// Admission is the admission block of a run's first phase event.
type Admission struct {
	RunID     string          `json:"runId"`
	Spec      json.RawMessage `json:"spec"`
	SeedInput Value           `json:"seedInput"`
}

// NodeRef names one execution of a node in events.
type NodeRef struct {
	Node    string `json:"node"`
	Attempt int64  `json:"attempt"`
}

// WatchEvent is the tagged union of watch events; exactly the fields of
// Type are set. Use the constructors.
type WatchEvent struct {
	Type        string          `json:"type"`
	Status      *ClusterStatus  `json:"status,omitempty"`
	Admission   *Admission      `json:"admission,omitempty"`
	Node        *NodeRef        `json:"node,omitempty"`
	Input       *Value          `json:"input,omitempty"`
	Outcome     json.RawMessage `json:"outcome,omitempty"`
	Fault       json.RawMessage `json:"fault,omitempty"`
	FinalStatus *ClusterStatus  `json:"final_status,omitempty"`
	StopMode    string          `json:"stop_mode,omitempty"`
}

// Watch event types.
const (
	EventPhase     = "phase"
	EventNodeBegin = "node_begin"
	EventNodeEnd   = "node_end"
	EventBookmark  = "bookmark"
	EventFault     = "fault"
	EventFinished  = "finished"
)

// LogRecord is one logs event record.
type LogRecord struct {
	Level   string `json:"level"`
	Target  string `json:"target"`
	Message string `json:"message"`
}

// AttachEvent is one agent/attach event.
type AttachEvent struct {
	Type string  `json:"type"`
	Text *string `json:"text,omitempty"`
}

// RunHarnessesResult is run/harnesses' answer: the harness entries a
// server offers.
type RunHarnessesResult struct {
	Harnesses []RunHarness `json:"harnesses"`
}

// RunHarness is one harness entry a server offers, which a runtime plan
// may name.
type RunHarness struct {
	// Name is the harness (codex, claude).
	Name string `json:"name"`
	// Kind is its driver: the harness's own CLI or command.
	Kind string `json:"kind"`
	// Models is the catalogue of models a binding on it may name.
	Models []string `json:"models"`
	// DefaultModel is the catalogue model a client uses when it is
	// given none.
	DefaultModel string `json:"defaultModel"`
	// Default is set on the server's only entry: a client that is given
	// no harness uses it.
	Default bool `json:"default"`
}
