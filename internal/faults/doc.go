// Package faults holds no code: its tests inject one fault each into a
// running daemon — venue links that drop, stall, send garbage and refuse;
// a claim store that throttles, hangs, answers 403 and resets — and check
// the promise docs/development.md (Faults) states for it. The recorder's faults (a disk that
// fills, SIGTERM mid-recording) need a child process and live with the
// command's tests in cmd/fanoutd.
package faults
