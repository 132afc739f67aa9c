package server_test

import (
	"testing"

	"github.com/oecp/oecp/protocol"
	"github.com/oecp/oecp/server"
)

func TestAnswerCode(t *testing.T) {
	str := protocol.ID{}
	if err := str.UnmarshalJSON([]byte(`"a\"b,}"`)); err != nil {
		t.Fatal(err)
	}
	num := protocol.ID{}
	_ = num.UnmarshalJSON([]byte(`7`))
	for _, tc := range []struct {
		frame []byte
		want  server.Code
	}{
		{protocol.ResultFrame(num, []byte(`{}`)), server.CodeOK},
		{protocol.ResultFrame(str, []byte(`{}`)), server.CodeOK},
		{protocol.ServerBusyFrame(str), server.CodeServerBusy},
		{protocol.DuplicateIDFrame(num), server.CodeDuplicateRequestID},
		{protocol.MethodNotFoundFrame(str), server.CodeMethodNotFound},
		{protocol.ErrorFrame(num, protocol.InvalidParams()), server.CodeInvalidParams},
		{protocol.ErrorFrame(num, protocol.AppError(protocol.NotFound, `a "quoted", message}`, map[string]any{"x": 1})), server.CodeNotFound},
		{protocol.ErrorFrame(str, protocol.Internal("")), server.CodeInternal},
		{protocol.ParseErrorFrame, server.CodeParseError},
		{protocol.ErrorFrame(num, &protocol.Error{Code: protocol.CodeInternalError, Message: "Internal error", DataCode: "STORE_UNAVAILABLE"}), server.CodeStoreUnavailable},
		{[]byte(`garbage`), server.CodeOtherError},
	} {
		if got := server.AnswerCode(tc.frame); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.frame, server.Codes[got], server.Codes[tc.want])
		}
	}
}
