package workspace

// Spreads reports whether dir carries the placement hint of runs removed
// at once.
var Spreads = spreads

// SetSpread sets or clears that hint.
var SetSpread = setSpread

// KeptPacks is the bound on the packs snapshots keep as git wrote them.
const KeptPacks = keptPacks
