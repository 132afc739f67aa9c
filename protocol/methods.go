package protocol

// MethodKind says whether a method answers once or establishes a
// subscription.
type MethodKind int

const (
	// Unary methods answer with exactly one response.
	Unary MethodKind = iota
	// Subscription methods answer once, then push notifications.
	Subscription
)

// MethodInfo describes one method of the registry.
type MethodInfo struct {
	Name string
	Kind MethodKind
	// DecodeData says which -32602 data variant a typed decode failure gets.
	DecodeData DecodeDataVariant
}

// DecodeDataVariant is the shape of error.data on a params decode failure.
type DecodeDataVariant int

const (
	// DataNone: -32602 with no data (initialize, get).
	DataNone DecodeDataVariant = iota
	// DataCode: {code:SCHEMA_VIOLATION} (plan, apply, subscriptions, run/*).
	DataCode
	// DataReason: {code:SCHEMA_VIOLATION, details:{reason}} (lifecycle).
	DataReason
)

// Method names.
const (
	MethodInitialize  = "initialize"
	MethodPlan        = "plan"
	MethodApply       = "apply"
	MethodUpdate      = "update"
	MethodStop        = "stop"
	MethodRetry       = "retry"
	MethodResubmit    = "resubmit"
	MethodDelete      = "delete"
	MethodGet         = "get"
	MethodWatch       = "watch"
	MethodLogs        = "logs"
	MethodAgentAttach = "agent/attach"
	MethodRunSubmit   = "run/submit"
	MethodRunList     = "run/list"
	MethodRunStatus   = "run/status"
	MethodRunWatch    = "run/watch"
	MethodRunLogs     = "run/logs"
	MethodRunAttach   = "run/attach"
	MethodRunForce    = "run/force"
	// MethodRunHarnesses is this implementation's addition to the native
	// surface: the host's harness entries and the models each offers.
	MethodRunHarnesses = "run/harnesses"

	NotifyEvent              = "event"
	NotifySubscriptionClosed = "subscription/closed"
)

// surfaceMethods is how many methods of Registry are the protocol's.
const surfaceMethods = 19

// Methods is the protocol surface in advertised order (the 19 methods of
// openrpc.json), the leading part of Registry.
var Methods = Registry[:surfaceMethods:surfaceMethods]

// Registry is every method this server serves: the protocol surface
// (Methods), then this implementation's additions to the native surface,
// which change no frame of the protocol's.
var Registry = []MethodInfo{
	{MethodInitialize, Unary, DataNone},
	{MethodPlan, Unary, DataCode},
	{MethodApply, Unary, DataCode},
	{MethodUpdate, Unary, DataReason},
	{MethodStop, Unary, DataReason},
	{MethodRetry, Unary, DataReason},
	{MethodResubmit, Unary, DataReason},
	{MethodDelete, Unary, DataReason},
	{MethodGet, Unary, DataNone},
	{MethodWatch, Subscription, DataCode},
	{MethodLogs, Subscription, DataCode},
	{MethodAgentAttach, Subscription, DataCode},
	{MethodRunSubmit, Unary, DataCode},
	{MethodRunList, Unary, DataCode},
	{MethodRunStatus, Unary, DataCode},
	{MethodRunWatch, Subscription, DataCode},
	{MethodRunLogs, Subscription, DataCode},
	{MethodRunAttach, Subscription, DataCode},
	{MethodRunForce, Unary, DataCode},
	{MethodRunHarnesses, Unary, DataCode},
}

var methodIndex = func() map[string]*MethodInfo {
	m := make(map[string]*MethodInfo, len(Registry))
	for i := range Registry {
		m[Registry[i].Name] = &Registry[i]
	}
	return m
}()

// LookupMethod finds a method in the registry.
func LookupMethod(name string) (*MethodInfo, bool) {
	m, ok := methodIndex[name]
	return m, ok
}

// DecodeError turns a typed-decoding failure into the -32602 variant the
// method uses.
func (m *MethodInfo) DecodeError(reason string) *Error {
	switch m.DecodeData {
	case DataNone:
		return InvalidParams()
	case DataReason:
		return SchemaReason(reason)
	default:
		return SchemaError()
	}
}
