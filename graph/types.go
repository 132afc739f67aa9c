package graph

// GraphSpec is an authored graph. Decode it with Decode; encode it
// with MarshalJSON (reference field order, sets sorted).
type GraphSpec struct {
	Profile      string        // ProfileFull or ProfileSingleWorker
	InitialInput PayloadType   // type of the run's root input
	Policy       PolicyBinding // policy reference, default deny
	Root         Node          // never nil after decoding
}

// PolicyBinding is `{"policy": PolicyRef, "default": "deny"}`.
type PolicyBinding struct {
	Policy  string // stable ref name@version
	Default string // always PolicyDefaultDeny
}

// NodeKind is the `kind` tag of a graph node.
type NodeKind string

// Node kinds.
const (
	KindStep     NodeKind = "step"
	KindVerifier NodeKind = "verifier"
	KindSeq      NodeKind = "seq"
	KindChoice   NodeKind = "choice"
	KindPar      NodeKind = "par"
	KindLoop     NodeKind = "loop"
	KindMap      NodeKind = "map"
	KindSucceed  NodeKind = "succeed"
	KindFail     NodeKind = "fail"
)

// Node is one graph node: *Step, *Verifier, *Seq, *Choice, *Par, *Loop,
// *Map, *Succeed or *Fail. The set is closed.
type Node interface {
	NodeName() string
	NodeKind() NodeKind
	writeJSON(w *jsonWriter)
	isNode()
}

// FieldPath is a non-empty path of field names (1..MaxFieldPathLen).
type FieldPath []string

// DataSource is the `source` of a DataSelector.
type DataSource string

// Data selector sources.
const (
	SourceState DataSource = "state"
	SourceItem  DataSource = "item" // the current map item
)

// DataSelector reads state or the current map item at a path.
type DataSelector struct {
	Source DataSource
	Path   FieldPath
}

// InputBinding copies a selected value to a target path (order target, value).
type InputBinding struct {
	Target FieldPath
	Value  DataSelector
}

// OutputChannel is a node output channel.
type OutputChannel string

// Output channels.
const (
	ChannelOut        OutputChannel = "out"
	ChannelSignal     OutputChannel = "signal"
	ChannelDiagnostic OutputChannel = "diagnostic"
)

// NodeOutputSelector selects part of a node's output.
type NodeOutputSelector struct {
	Node    string
	Channel OutputChannel
	Path    FieldPath
}

// WriteBinding writes a node output into state (order value, target).
type WriteBinding struct {
	Value  NodeOutputSelector
	Target FieldPath
}

// ControlSource is the `source` of a ControlSelector.
type ControlSource string

// Control sources.
const (
	ControlSignal ControlSource = "signal"
	ControlError  ControlSource = "error"
	ControlGroup  ControlSource = "group"
)

// ControlSelector names a finite control value of a node. Field nil means
// absent (emitted as null).
type ControlSelector struct {
	Name   string
	Source ControlSource
	Field  *string
}

// GuardKind is the `kind` tag of a Guard.
type GuardKind string

// Guard kinds.
const (
	GuardIn     GuardKind = "in"
	GuardAll    GuardKind = "all"
	GuardAny    GuardKind = "any"
	GuardNot    GuardKind = "not"
	GuardKOfN   GuardKind = "k_of_n"
	GuardKOfMap GuardKind = "k_of_map"
)

// Guard is a finite boolean expression over control selectors. Which fields
// are meaningful depends on Kind:
//
//	in:       Value, Labels
//	all, any: Guards
//	not:      Inner
//	k_of_n:   Count, Values, Labels
//	k_of_map: Count, Value, Labels
type Guard struct {
	Kind   GuardKind
	Value  *ControlSelector
	Labels []string // sorted, unique
	Guards []Guard
	Inner  *Guard
	Count  uint64
	Values []ControlSelector
}

// JoinKind is the `kind` of a par join.
type JoinKind string

// Join kinds.
const (
	JoinAll    JoinKind = "all"
	JoinAny    JoinKind = "any"
	JoinQuorum JoinKind = "quorum"
	JoinFirst  JoinKind = "first"
)

// Join is a par join policy: Count for quorum, When for first.
type Join struct {
	Kind  JoinKind
	Count uint64
	When  *Guard
}

// Step is an executable leaf.
type Step struct {
	Name          string
	Worker        string  // stable ref name@version
	Instructions  *string // nil = absent
	Input         PayloadType
	Output        PayloadType
	InputBindings []InputBinding
	WriteBindings []WriteBinding
	TimeoutMs     uint64
	Attempts      uint64
}

// Verifier is an executable leaf with signals and a diagnostic.
type Verifier struct {
	Name          string
	Worker        string
	Input         PayloadType
	Output        PayloadType
	InputBindings []InputBinding
	WriteBindings []WriteBinding
	TimeoutMs     uint64
	Attempts      uint64
	Signals       map[string][]string // field name -> sorted unique label set
	Diagnostic    PayloadType
	Instructions  *string
}

// Seq runs its children in order.
type Seq struct {
	Name               string
	State              PayloadType
	Children           []Node
	PromotedStatePaths []FieldPath
}

// ChoiceBranch is one guarded alternative of a choice.
type ChoiceBranch struct {
	When Guard
	Node Node
}

// Choice runs the first branch whose guard holds, else Otherwise (nil =
// absent, emitted as null).
type Choice struct {
	Name               string
	State              PayloadType
	Branches           []ChoiceBranch
	Otherwise          Node
	PromotedStatePaths []FieldPath
}

// Par runs its branches concurrently and joins them.
type Par struct {
	Name               string
	State              PayloadType
	Branches           []Node
	PromotedStatePaths []FieldPath
	Join               Join
}

// Loop is a do-while over Body, at most MaxIterations times. Until nil means
// absent.
type Loop struct {
	Name               string
	State              PayloadType
	Body               Node
	Until              *Guard
	MaxIterations      uint64
	PromotedStatePaths []FieldPath
}

// Map runs Body once per item of the array selected by Over.
type Map struct {
	Name               string
	State              PayloadType
	Body               Node
	Over               DataSelector
	MaxItems           uint64
	PromotedStatePaths []FieldPath
}

// Succeed terminates successfully with an output built from state.
type Succeed struct {
	Name     string
	Output   PayloadType
	Bindings []InputBinding
}

// Fail terminates with a finite reason label.
type Fail struct {
	Name   string
	Reason string
}

func (n *Step) NodeName() string     { return n.Name }
func (n *Verifier) NodeName() string { return n.Name }
func (n *Seq) NodeName() string      { return n.Name }
func (n *Choice) NodeName() string   { return n.Name }
func (n *Par) NodeName() string      { return n.Name }
func (n *Loop) NodeName() string     { return n.Name }
func (n *Map) NodeName() string      { return n.Name }
func (n *Succeed) NodeName() string  { return n.Name }
func (n *Fail) NodeName() string     { return n.Name }

func (*Step) NodeKind() NodeKind     { return KindStep }
func (*Verifier) NodeKind() NodeKind { return KindVerifier }
func (*Seq) NodeKind() NodeKind      { return KindSeq }
func (*Choice) NodeKind() NodeKind   { return KindChoice }
func (*Par) NodeKind() NodeKind      { return KindPar }
func (*Loop) NodeKind() NodeKind     { return KindLoop }
func (*Map) NodeKind() NodeKind      { return KindMap }
func (*Succeed) NodeKind() NodeKind  { return KindSucceed }
func (*Fail) NodeKind() NodeKind     { return KindFail }

func (*Step) isNode()     {}
func (*Verifier) isNode() {}
func (*Seq) isNode()      {}
func (*Choice) isNode()   {}
func (*Par) isNode()      {}
func (*Loop) isNode()     {}
func (*Map) isNode()      {}
func (*Succeed) isNode()  {}
func (*Fail) isNode()     {}

// PayloadKind is the `kind` tag of a PayloadType.
type PayloadKind string

// Payload kinds. The set is closed.
const (
	PayloadNull    PayloadKind = "null"
	PayloadBoolean PayloadKind = "boolean"
	PayloadInteger PayloadKind = "integer"
	PayloadNumber  PayloadKind = "number"
	PayloadString  PayloadKind = "string"
	PayloadRecord  PayloadKind = "record"
	PayloadArray   PayloadKind = "array"
	PayloadEnum    PayloadKind = "enum"
)

// PayloadType is a closed structural type. Fields is meaningful for record,
// Items for array, Values (sorted, unique) for enum.
type PayloadType struct {
	Kind   PayloadKind
	Fields map[string]RecordField
	Items  *PayloadType
	Values []string
}

// RecordField is one declared record field.
type RecordField struct {
	Type     PayloadType
	Required bool
}
