package workspace

// SpreadsChildren reports whether dir carries the placement hint Paths
// gives the run directories' parents.
var SpreadsChildren = spreadsChildren

// SpreadChildren gives dir that hint.
var SpreadChildren = spreadChildren
