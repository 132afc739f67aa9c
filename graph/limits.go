package graph

import "github.com/oecp/oecp/protocol"

// Bounds of the shared value types; a value outside one fails to decode.
const (
	// MaxIdentifierBytes bounds NodeName, FieldName and EnumLabel.
	MaxIdentifierBytes = 128
	// MaxStableRefBytes bounds a whole `name@version` stable reference.
	MaxStableRefBytes = 256
	// MaxFieldPathLen bounds the number of segments of a FieldPath.
	MaxFieldPathLen = 64
	// MaxNonEmptyListLen bounds children, branches, guard lists, selector
	// lists and witness order/ranking lists.
	MaxNonEmptyListLen = 4096
	// MaxLabelSetLen bounds enum label sets: payload enum values, guard labels,
	// verifier signal values.
	MaxLabelSetLen = 4096
	// MaxSafeInteger is the upper bound of PositiveInteger and Generation
	// (2^53-1).
	MaxSafeInteger = protocol.MaxSafeInteger
	// MaxInstructionsBytes bounds step/verifier NodeInstructions.
	MaxInstructionsBytes = 16384
	// MaxBoundedString256Chars bounds BoundedString256 values in Unicode
	// scalar values: artifact id and media type among others.
	MaxBoundedString256Chars = protocol.MaxBoundedString
	// SHA256HexLen is the exact length of a lowercase hex sha256.
	SHA256HexLen = 64
)

// Verifier ceilings. Exceeding one yields a ceiling_exceeded
// diagnostic, never a decode error.
const (
	// MaxGraphNodes is the ceiling on the number of nodes in a graph.
	MaxGraphNodes = 4096
	// MaxGraphDepth is the ceiling on node nesting; the root is depth 1.
	MaxGraphDepth = 64
	// MaxGuardNodes is the ceiling on guard AST nodes across a graph.
	MaxGuardNodes = 4096
	// MaxFiniteCheckAssignments bounds the control assignments a finite
	// check (choice exhaustiveness, loop exit) may enumerate. It is
	// enforced by the flow-analysing verifier, not by Structural.
	MaxFiniteCheckAssignments = 65536
	// MaxLoopIterations is the ceiling on a loop's maxIterations.
	MaxLoopIterations = 100
	// MaxMapItems is the ceiling on a map's maxItems.
	MaxMapItems = 1024
	// MaxAttemptsPerExecutable is the ceiling on step/verifier attempts.
	MaxAttemptsPerExecutable = 100
	// MaxExecutionsPerRun is the ceiling on the maxNodeExecutions fold.
	MaxExecutionsPerRun = 65536
	// MaxLoopBodyEntries is the ceiling on the total loop-entry fold.
	MaxLoopBodyEntries = 65536
	// MaxPeakConcurrency is the ceiling on the peakConcurrency fold.
	MaxPeakConcurrency = 1024
)

// Closed enumerations of the graph's top level.
const (
	// ProfileFull is the full-v1 graph profile.
	ProfileFull = protocol.ProfileFull
	// ProfileSingleWorker is the single-worker profile: one step root.
	ProfileSingleWorker = protocol.ProfileSingleWorker
	// PolicyDefaultDeny is the only PolicyBinding default.
	PolicyDefaultDeny = "deny"
	// ReservedFailReason may not be used as a fail node reason.
	ReservedFailReason = "unhandled"
)
