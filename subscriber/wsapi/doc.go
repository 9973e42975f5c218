// Package wsapi is the subscriber side of fanoutd on the wire: the
// websocket endpoint (GET /v1/stream), one session per connection, the
// client command protocol, bearer-token authentication with scopes, the
// per-connection limits, and the metrics of all of it.
//
// # Sessions
//
// Each connection is a subscriber.Conn (its queues, filled by the fanout
// core) and two goroutines: the reader, which parses commands and answers
// them through the connection's notice queue, and the writer, the only
// goroutine that writes data to the socket. The writer waits on
// Conn.Ready, then drains the queues until they are empty, writing each
// drain as one websocket text message whose JSON objects are separated by
// '\n' (notices first, then data, as Drain returns them), with a write
// deadline on every write. Batching is where the CPU goes: one write
// system call per batch instead of per event (a one-write-per-event Go
// fanout measured about 6 µs of CPU per delivered message on this
// machine's reference load; see the README for what this one measures).
// With Options.WriteDelay, writers are not woken by each first queued
// message but at most once per interval by one flusher goroutine, so more
// events share a write; the cost is up to that much latency.
//
// Events are encoded once by the fanout feed; every subscriber's writer
// copies the same bytes into its (pooled) write buffer. gorilla's
// PreparedMessage was rejected: it caches the frame of one message, but a
// batch is a different message for every subscriber, and without
// compression a prepared frame saves only the copy into the write buffer.
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
// connection that attaches while another holds the name takes it over: the
// old connection gets an error message with code "taken_over" and is
// closed with code 4001. A reattach gets a resumed notice (reason
// "reattached") and snapshots, queued by the core before the writer starts.
//
// # Shutdown
//
// Server.Shutdown stops accepting, lets every writer flush what is queued,
// closes each connection with 1001, and waits, until its context is done;
// then it closes what is left at once. The caller sends the shutdown
// notice (fanout.Hub.Broadcast) before calling it.
package wsapi
