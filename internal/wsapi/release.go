package wsapi

import (
	"runtime/debug"
	"sync"
	"time"
)

// A handshake leaves about 14 KB of garbage (chiefly net/http's 4 KiB
// reader and writer, never returned to its pools once hijacked), and idle
// connections allocate too little for another collection: a burst's free
// pages would stay resident under the heap goal. So after releaseAfter
// accepts or more and releaseQuiet without one, they go back to the system.
const (
	releaseAfter = 256
	releaseQuiet = time.Second
)

// freeOSMemory is debug.FreeOSMemory; tests replace it to count calls.
var freeOSMemory = debug.FreeOSMemory

// burstRelease returns the garbage of a burst of accepts once it ends.
type burstRelease struct {
	mu      sync.Mutex
	n       int       // connections accepted since the last release
	last    time.Time // when the latest was
	timer   *time.Timer
	stopped bool
}

// accepted counts a connection and, from the releaseAfter'th on, has a
// release follow once accepts are quiet.
func (b *burstRelease) accepted() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	b.last = time.Now()
	if b.n >= releaseAfter && b.timer == nil && !b.stopped {
		b.timer = time.AfterFunc(releaseQuiet, b.fire)
	}
}

// fire releases if no connection was accepted for releaseQuiet, and
// otherwise waits for the rest of that quiet time after the latest.
func (b *burstRelease) fire() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if wait := releaseQuiet - time.Since(b.last); wait > 0 {
		b.timer.Reset(wait)
		b.mu.Unlock()
		return
	}
	b.n, b.timer = 0, nil
	b.mu.Unlock()
	freeOSMemory()
}

// stop cancels a release not yet made.
func (b *burstRelease) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
}
