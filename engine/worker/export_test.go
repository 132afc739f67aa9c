package worker

import "io"

// CopyReadAhead is copyOut's read-ahead with a chosen byte budget; it
// returns the most bytes the read-ahead held at once.
func CopyReadAhead(dst io.Writer, src io.Reader, limit, budget int64) int64 {
	return copyReadAhead(dst, src, limit, budget)
}
