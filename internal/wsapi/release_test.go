package wsapi

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestBurstRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var released atomic.Int32
		defer func(f func()) { freeOSMemory = f }(freeOSMemory)
		freeOSMemory = func() { released.Add(1) }
		var b burstRelease

		// Fewer than releaseAfter accepts: nothing to return.
		for range releaseAfter - 1 {
			b.accepted()
		}
		time.Sleep(2 * releaseQuiet)
		if n := released.Load(); n != 0 {
			t.Fatalf("%d releases after %d accepts, want 0", n, releaseAfter-1)
		}

		// The releaseAfter'th: one release, a quiet second after the
		// latest accept, however long the burst goes on.
		b.accepted()
		for range 5 {
			time.Sleep(releaseQuiet / 2)
			b.accepted()
		}
		synctest.Wait()
		if n := released.Load(); n != 0 {
			t.Fatalf("released during the burst (%d)", n)
		}
		time.Sleep(releaseQuiet + time.Millisecond)
		synctest.Wait()
		if n := released.Load(); n != 1 {
			t.Fatalf("%d releases a quiet second after the burst, want 1", n)
		}
		time.Sleep(3 * releaseQuiet)
		if n := released.Load(); n != 1 {
			t.Fatalf("%d releases with no accepts since, want 1", n)
		}

		// A stopped server releases nothing more.
		for range releaseAfter {
			b.accepted()
		}
		b.stop()
		time.Sleep(2 * releaseQuiet)
		if n := released.Load(); n != 1 {
			t.Fatalf("%d releases after stop, want 1", n)
		}
	})
}
