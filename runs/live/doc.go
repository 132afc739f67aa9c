// Package live keeps the live output of a native run's executions for
// run/attach. Each execution running here has a sliding window of its
// latest encoded attach events (Hub); a subscriber reads the window by
// position (Window.Follow), so a publisher never waits for anyone. A
// subscriber that falls more than the window behind has lost events and
// is closed with SLOW_CONSUMER; one that reaches the end of an ended
// execution is closed with done. On a store shared by several replicas
// (store.Broadcaster), Relay broadcasts each event of an execution running
// here and keeps, for a client attached here to an execution running
// elsewhere, a window fed by those messages.
//
// Nothing here is durable (the durable copy of an execution's output is
// its log), and nothing here reads a run's records: the caller names each
// execution by a key of its own and tells Relay.Follow how to learn from
// the store that the execution ended.
package live
