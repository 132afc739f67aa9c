package main

import (
	"log/slog"
	"net/http"

	"github.com/oecp/oecp/identity"
	"github.com/oecp/oecp/runs"
	"github.com/oecp/oecp/server"
	"github.com/oecp/oecp/transport/exporthttp"
)

// exportRoutes adds the run export route (exporthttp.Path) to the main
// listener's mux when the backend serves native runs: it resolves
// identities exactly as the /oecp upgrade does, and bounds each write by
// --http-write-timeout rather than the whole response.
func exportRoutes(mux *http.ServeMux, backend server.Backend, resolver identity.Resolver, cfg serveConfig, log *slog.Logger) {
	rb, ok := backend.(interface{ Runs() *runs.Backend })
	if !ok {
		return
	}
	mux.Handle(exporthttp.Path, exporthttp.Handler(rb.Runs(), resolver, cfg.ops.http.WriteTimeout, log))
}
