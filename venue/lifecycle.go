package venue

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
)

// ErrStarted is returned (wrapped with the venue's name) by a second Start.
var ErrStarted = errors.New("adapter already started")

// Lifecycle is the start/stop bookkeeping every adapter shares: Start runs
// the adapter's goroutines once, each labelled with the venue for pprof,
// under a context Stop cancels; Stop waits for them. The zero Lifecycle is
// ready to use. It is safe for concurrent use.
type Lifecycle struct {
	mu      sync.Mutex // protects the fields below
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when every goroutine Start launched returned
}

// Start launches each of runs on its own goroutine under a context derived
// from ctx, and returns at once. A second call returns ErrStarted.
func (l *Lifecycle) Start(ctx context.Context, venueName string, runs ...func(context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("%s: %w", venueName, ErrStarted)
	}
	l.started = true
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("venue", venueName), func(ctx context.Context) {
			defer wg.Done()
			run(ctx)
		})
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return nil
}

// Stop cancels the goroutines' context and waits for them to return, or
// until ctx is done: then it returns ctx.Err() and they finish on their
// own. Stop before Start, or twice, is a no-op returning nil.
func (l *Lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	if !l.started {
		l.mu.Unlock()
		return nil
	}
	l.cancel()
	done := l.done
	l.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Started reports whether Start was called.
func (l *Lifecycle) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}
