// Package verifier is the production graph verifier of OECP v1: worker
// descriptors and the registry port that resolves a worker reference for a
// graph node, the flow analysis (reachability, choice exhaustiveness over
// the finite control space, the label domains of k_of_n guards, loop-exit
// satisfiability, definite definition of reads, parallel write conflicts,
// promotion safety, terminal coverage, the ceilings on control assignments
// and analysis work) and the worker-compatibility pass that runs only when
// the analysis found nothing.
//
// Verify never panics and is safe for concurrent use: a Verifier holds only
// its Registry, and every call works on its own state.
package verifier
