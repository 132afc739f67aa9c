package store

// Broadcaster is implemented by a store shared by several processes that
// can carry short-lived messages between them (the live output of an
// execution running on one replica, to watchers on the others). Nothing
// broadcast is durable: a message is seen only by the subscribers of the
// processes that are listening when it arrives, and one that cannot be
// sent in time is dropped (receivers tell a gap by the senders' own
// sequence numbers). A process's messages reach each other process in the
// order it broadcast them; a process never receives its own.
type Broadcaster interface {
	// Broadcast queues payload (valid UTF-8, at most MaxBroadcastBytes)
	// on topic (a word: letters and digits) for the other processes,
	// without waiting; it reports false when the message was dropped (the
	// queue is full, or the store is closed).
	Broadcast(topic string, payload []byte) bool
	// OnBroadcast sets the one function the other processes' messages on
	// topic are handed to, on one goroutine, in order; it must not block.
	OnBroadcast(topic string, fn func(payload []byte))
}

// MaxBroadcastBytes bounds one broadcast message.
const MaxBroadcastBytes = 64 << 10
