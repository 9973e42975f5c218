// Package daemon is fanoutd as a value: build one with New from a resolved
// configuration (package config) and Options, run it with Run.
//
// # What it wires
//
// For each enabled venue, a fanout feed and the venue's adapter (from
// Options.Venues, by default the table in package venues), whose sink is
// the feed; the websocket server (package wsapi) over the feeds' hub; the
// claim-check node (snapshot claims of every level2 book, the claim
// gateway); the recorder when record.enabled; and the HTTP routes of
// docs/operations.md. A frame travels: venue socket → venue.Link → the adapter's
// decoder → venue.Event → fanout.Feed (seq, encode once, queue check) →
// subscriber.Mailbox → the wsapi writer → the subscriber's socket.
//
// # Lifecycle
//
// Run starts the recorder, the venues, the claim-check node and a sweep of
// the venues' symbols, serves HTTP until its context is done, then calls
// Shutdown, whose doc gives the order of the steps. Replay and Export play
// captures through the same daemon and the venues' own decoders.
//
// Package daemontest starts one from a test in a line.
//
// Locks: Daemon.reloadMu is taken first; venueRun.mu before a feed's lock
// (the symbol sweep), exportTap.mu before the export sink's, claimWire.mu
// after a feed's and the claim writer's; the whole daemon's order is
// docs/lock-order.md.
package daemon
