package graph

// Value bounds of spec §2 (01-protocol.md "Shared value types and limits").
const (
	// MaxIdentifierBytes bounds NodeName, FieldName and EnumLabel (§2).
	MaxIdentifierBytes = 128
	// MaxStableRefBytes bounds a whole `name@version` stable reference (§2).
	MaxStableRefBytes = 256
	// MaxFieldPathLen bounds the number of segments of a FieldPath (§2).
	MaxFieldPathLen = 64
	// MaxNonEmptyListLen bounds children, branches, guard lists, selector
	// lists and witness order/ranking lists (§2).
	MaxNonEmptyListLen = 4096
	// MaxLabelSetLen bounds enum label sets: payload enum values, guard labels,
	// verifier signal values (§2).
	MaxLabelSetLen = 4096
	// MaxSafeInteger is the upper bound of PositiveInteger and Generation
	// (2^53-1, §2).
	MaxSafeInteger = 9007199254740991
	// MaxInstructionsBytes bounds step/verifier NodeInstructions (§2).
	MaxInstructionsBytes = 16384
	// MaxBoundedString256Chars bounds BoundedString256 values in Unicode
	// scalar values: artifact id and media type among others (§2).
	MaxBoundedString256Chars = 256
	// SHA256HexLen is the exact length of a lowercase hex sha256 (§2).
	SHA256HexLen = 64
)

// Verifier ceilings of spec §5.7. Exceeding one yields a ceiling_exceeded
// diagnostic, never a decode error.
const (
	// MaxGraphNodes is the ceiling on the number of nodes in a graph (§5.7).
	MaxGraphNodes = 4096
	// MaxGraphDepth is the ceiling on node nesting; the root is depth 1 (§5.7).
	MaxGraphDepth = 64
	// MaxGuardNodes is the ceiling on guard AST nodes across a graph (§5.7).
	MaxGuardNodes = 4096
	// MaxFiniteCheckAssignments bounds the control assignments a finite
	// check (choice exhaustiveness, loop exit) may enumerate (§5.7). It is
	// enforced by the flow-analysing verifier, not by Structural.
	MaxFiniteCheckAssignments = 65536
	// MaxLoopIterations is the ceiling on a loop's maxIterations (§5.7).
	MaxLoopIterations = 100
	// MaxMapItems is the ceiling on a map's maxItems (§5.7).
	MaxMapItems = 1024
	// MaxAttemptsPerExecutable is the ceiling on step/verifier attempts (§5.7).
	MaxAttemptsPerExecutable = 100
	// MaxExecutionsPerRun is the ceiling on the maxNodeExecutions fold (§5.7).
	MaxExecutionsPerRun = 65536
	// MaxLoopBodyEntries is the ceiling on the total loop-entry fold (§5.7).
	MaxLoopBodyEntries = 65536
	// MaxPeakConcurrency is the ceiling on the peakConcurrency fold (§5.7).
	MaxPeakConcurrency = 1024
)

// Closed enumerations of §5.1 and §5.3.
const (
	// ProfileFull is the full-v1 graph profile.
	ProfileFull = "openengine.graph.full/v1"
	// ProfileSingleWorker is the single-worker profile: one step root.
	ProfileSingleWorker = "openengine.graph.single-worker/v1"
	// PolicyDefaultDeny is the only PolicyBinding default.
	PolicyDefaultDeny = "deny"
	// ReservedFailReason may not be used as a fail node reason (§2).
	ReservedFailReason = "unhandled"
)
