package testkit

import (
	"bytes"

	"github.com/oecp/oecp/internal/syncio"
)

// SyncBuffer is a buffer one goroutine writes (a logger, a process's
// stderr) while another reads it.
type SyncBuffer struct {
	*syncio.Writer
	b *bytes.Buffer
}

// NewSyncBuffer is an empty SyncBuffer.
func NewSyncBuffer() *SyncBuffer {
	b := new(bytes.Buffer)
	return &SyncBuffer{Writer: syncio.NewWriter(b), b: b}
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	var out string
	s.Locked(func() { out = s.b.String() })
	return out
}
