package diskusage

// MeasureAtMost is Measure visiting at most maxEntries entries.
var MeasureAtMost = measure
