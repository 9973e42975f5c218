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

// Lifecycle is the start/stop bookkeeping every adapter shares, and its
// Venue, Start and Stop methods (venue.Adapter) when embedded: Init names
// the venue and the adapter's goroutines; Start runs them once, each
// labelled with the venue for pprof, under a context Stop cancels; Stop
// waits for them. It is safe for concurrent use.
type Lifecycle struct {
	name string
	runs []func(context.Context)

	mu      sync.Mutex // protects the fields below
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when every goroutine Start launched returned
}

// Init names the venue and the goroutines Start launches. Call it once,
// before Start.
func (l *Lifecycle) Init(venueName string, runs ...func(context.Context)) {
	l.name, l.runs = venueName, runs
}

// Venue returns the name Init gave.
func (l *Lifecycle) Venue() string { return l.name }

// Start launches the adapter's goroutines on their own goroutine each, under
// a context derived from ctx, and returns at once; they run until ctx is
// done or Stop is called. A second call returns ErrStarted.
func (l *Lifecycle) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("%s: %w", l.name, ErrStarted)
	}
	l.started = true
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, run := range l.runs {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("venue", l.name), func(ctx context.Context) {
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

// Stop closes the adapter's links: it cancels the goroutines' context and
// waits for them to return, or until ctx is done: then it returns
// ctx.Err() and they finish on their own. Stop before Start, or twice, is
// a no-op returning nil.
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
