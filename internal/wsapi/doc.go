// Package wsapi is the subscriber side of fanoutd on the wire: the
// websocket endpoint (GET /v1/stream), one session per connection, the
// client command protocol, authentication (with package api's tokens and
// scopes), name ownership, the per-connection limits, and the metrics of
// all of it.
//
// # Sessions
//
// Each connection is a subscriber.Mailbox (its queues, filled by the fanout
// core), a reader, which reads commands and answers them (Mailbox.Reply:
// on the notice queue, in order with notices, but bounded by
// Limits.MaxReplyBytes), and a writer. The HTTP handler
// returns once the connection is upgraded, so net/http's per-connection
// state is not kept. Every client message
// costs a unit of the command rate, whether it parses or not. Data is
// written in batches: a drain of the queues goes out as one websocket text
// message whose JSON objects are separated by '\n' (notices first, then
// data, as Drain returns them), within MaxBatchBytes unless it is one
// message. One write system call per batch instead of per event is where
// the CPU is saved.
//
// Without Options.WriteDelay the writer goroutine waits on Mailbox.Ready and
// drains until the queues are empty. With it (the daemon's default), a
// pool of GOMAXPROCS write workers does the data writes: each worker
// writes the connections of its shard whose queue signalled Ready when
// they are due (at once after an idle spell, else an age after their last
// write that grows with their rate up to WriteDelay, scaled down while the
// worker has time to spare), with non-blocking
// writes, so no goroutine is woken per connection and more events share a
// write; the cost is up to WriteDelay of latency. With Options.Uring a worker hands all of a tick's writes to
// the kernel in one io_uring_enter (sends with MSG_DONTWAIT) instead of
// one write(2) each. A connection whose socket does not take a whole batch goes to
// its writer goroutine, which finishes the frame with blocking writes
// under the write deadline and drains until empty before the pool takes
// it back. The writer goroutine also writes pings and the closing frames;
// with the pool it runs only while it has such work.
//
// The reader is this package's own (read.go; gorilla only does the
// handshake). Once everything read has been consumed at a message
// boundary the connection parks: its read buffer goes back to a pool and
// its socket waits in the server's epoll poller (rawio.Poller) with no
// goroutine, until it is readable, when a goroutine reads what is there,
// answers it and parks again. An idle connection, with the write pool,
// thus costs no goroutine, no stack and no buffer. The read deadline (two
// ping intervals without a message or a pong) is a timer. Where there is
// no epoll the reader is a goroutine per connection, blocked on the
// socket, that answers each command on a goroutine that ends with it, so
// its own stack stays small.
//
// Every frame is written by this package under one per-connection lock
// (the writer's), so batches leave in queue order whoever writes them:
// the reader's pongs, close echoes and the close frames of a protocol
// error (1002) or a message past the read limit (1009) included.
//
// Events are encoded once by the fanout feed; every batch copies the same
// bytes into its writer's frame buffer.
//
// # Slow sockets
//
// Two limits per connection, as nats-server has: the fanout core bounds
// the queue (messages and bytes), and the writer's deadline bounds how long
// a socket may stop draining. The kernel's send buffer is bounded too
// (Options.SendBuffer) so the backlog the core measures is the backlog
// that exists. A connection past its write deadline is closed; an
// ephemeral subscriber is then removed everywhere, a named one is detached
// and keeps its subscriptions.
//
// # Named subscribers
//
// ?name= attaches the connection to a durable name (fanout.Hub.Attach). A
// name belongs to the token that created it: another token is refused
// with 409 name_taken before the upgrade, and Server.Subscribers lists a
// token only its own. A connection of the same token that attaches while
// another holds the name takes it over: the old connection gets an error
// message with code "taken_over" and is closed with code 4001. A reattach
// gets a resumed notice (reason "reattached") and snapshots, or the events
// it missed where the core's recovery window holds them, queued by the
// core before the writer starts. A name with no connection for NamedTTL is
// forgotten (fanout.Hub.ExpireAfter).
//
// # Token expiry and reloads
//
// A connection of a JWT (api.Token.Expires set) runs a clock (expiry): a
// token_expiring notice Options.ExpiringNotice before exp (at once if
// sooner), and at exp a close with 4003 (TokenExpired). {"op":"refresh",
// "token":…} replaces the connection's token with another of the same
// owner whose scopes cover its subscriptions, and moves the clock; a
// refused refresh is an error reply and changes nothing. After a reload
// swaps the tokens and keys of Options.Auth, Server.Reauthenticate checks
// every connection again and closes with 4004 (TokenRevoked) those whose
// token is gone. Either close detaches as any other: a named subscriber
// keeps its subscriptions.
//
// # Shutdown
//
// Server.Shutdown stops accepting, lets every writer flush what is queued,
// closes each connection with 1001, and waits, until its context is done;
// then it closes what is left at once. The caller sends the shutdown
// notice (fanout.Hub.Broadcast) before calling it.
//
// A connection's write side is its writer (writer.go), whose lock is held
// while its queue is drained and written, so it is taken before the
// queue's (subscriber.Mailbox) lock; a write-pool worker only tries it.
// The daemon's lock order is docs/lock-order.md.
package wsapi
