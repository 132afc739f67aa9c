package server

import (
	"context"

	"github.com/oecp/oecp/protocol"
)

// EmptyBackend is the reference's default backend: an empty cluster that
// serves initialize and get and answers every other method with the
// "Backend does not …" errors. It is a baseline for tests and embedding.
type EmptyBackend struct{ Unsupported }

// Initialize advertises no capabilities.
func (EmptyBackend) Initialize(context.Context) (*protocol.InitializeResult, error) {
	return &protocol.InitializeResult{
		ProtocolVersion: protocol.Version,
		Capabilities:    protocol.Capabilities{GraphProfiles: []string{}},
		Status:          protocol.EmptyStatus(),
	}, nil
}

// Get reports the empty cluster.
func (EmptyBackend) Get(_ context.Context, p protocol.GetParams) (*protocol.GetResult, error) {
	if p.AtCursor != nil {
		return nil, protocol.AppError(protocol.InvalidPhase, protocol.MsgCursorUnavailable, map[string]any{"currentCursor": nil})
	}
	return &protocol.GetResult{Spec: []byte("null"), Status: protocol.EmptyStatus()}, nil
}
