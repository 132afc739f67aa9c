package workspace

// Spreads reports whether dir carries the placement hint of runs removed
// at once.
var Spreads = spreads

// SetSpread sets or clears that hint.
var SetSpread = setSpread
