// Package client is the Go client of the OpenEngine Cluster Protocol v1: a
// JSON-RPC 2.0 connection over WebSocket (Dial) or NDJSON (NewNDJSON,
// DialCommand), typed methods for every v1 method, subscriptions delivered
// on Go channels, request cancellation through $/cancelRequest, and a
// reconnecting watch (FollowWatch) that resumes from the last cursor it
// delivered.
//
// A Conn owns one id space: ids are minted from a per-connection counter
// and never reused, so a late answer to a cancelled request can never be
// mistaken for the answer to a newer one.
package client
