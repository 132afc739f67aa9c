module github.com/oecp/oecp

go 1.26.8

require (
	github.com/coder/websocket v1.8.15 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
