// Package tardis holds no code: its tests compare fanoutd's derived streams
// with the tardis-dev npm library's (book_snapshot_<d>_<i>, quote,
// trade_bar_<i>) on the same captures, run offline by run.js beside them.
// They skip unless node and the harness's node_modules are installed
// (npm ci in this directory). See docs/protocol.md, Derived streams.
package tardis
