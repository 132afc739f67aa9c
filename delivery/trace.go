package delivery

import (
	"context"

	"github.com/oecp/oecp/tracing"
)

// traced starts the span of one stage of a delivery (the push, the pull
// request) under the execution's; end ends it, failed (error.type error)
// when err is not nil. The error's text stays out of the span: it may
// name the repository's URL or what git printed.
func traced(ctx context.Context, name string) (context.Context, func(err error)) {
	if !tracing.Enabled() {
		return ctx, func(error) {}
	}
	ctx, span := tracing.Start(ctx, name)
	return ctx, func(err error) {
		if err != nil {
			tracing.Fail(span, "error", name+" failed")
		}
		span.End()
	}
}
