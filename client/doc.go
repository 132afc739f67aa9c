// Package client is the Go client of the OpenEngine Cluster Protocol v1 and
// of oecp's native runs: a JSON-RPC 2.0 connection over WebSocket (Dial) or
// NDJSON (NewNDJSON, DialCommand), typed methods for every v1 and run/*
// method, subscriptions delivered on Go channels, request cancellation
// through $/cancelRequest, reconnecting followers that resume from the last
// cursor they delivered (FollowWatch, FollowRunWatch, FollowRunLogs), and a
// run's export read over HTTP (Export).
//
// A Conn owns one id space: ids are minted from a per-connection counter
// and never reused, so a late answer to a cancelled request can never be
// mistaken for the answer to a newer one.
package client
