package venue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// DefaultMaxConns bounds a Pool's connections when PoolConfig.MaxConns is 0.
const DefaultMaxConns = 64

// PoolConfig is a venue link spread over connections where the venue caps
// what one connection carries.
type PoolConfig struct {
	// Link is what every connection shares: URL, Dial, timeouts, Sink,
	// Recorder (a ConnRecorder records each connection apart), Logger.
	// Its Decoder, Coverage, Connected and Tick are each connection's own
	// and come from Conn. MaxSendsPerSecond and DialSpacing are per
	// connection unless PerAddress is set.
	Link LinkConfig
	// PerAddress makes the request and dial pacing one for all
	// connections: the venue's limits count per address (Coinbase).
	PerAddress bool
	// Capacity is what one connection carries, in the venue's own unit
	// (level2 products, streams, characters of args); 0 is no cap.
	Capacity int
	// MaxConns bounds the connections; past it Place fails. Defaults to
	// DefaultMaxConns.
	MaxConns int
	// Conn fills in connection i's own Decoder, Coverage, Connected and
	// Tick. Called with the decode lock held (from NewPool or Place).
	Conn func(i int, cfg *LinkConfig)
}

// Pool is a venue link over one or more connections: each is a Link with
// its own dial, backoff, watchdog and decoder, all under one decode lock
// so the sink sees one ordered venue. Keys (symbols) are placed on the
// first connection with room for their cost; a new connection opens when
// every one is full. Link notices name the connection (details
// `connection`), and a connection that drops while others stay names its
// streams (`streams`). Build one with NewPool.
type Pool struct {
	cfg PoolConfig
	mu  sync.Mutex // the decode lock of every connection

	// Under the decode lock.
	conns []*poolConn
	where map[string]int

	rmu  sync.Mutex // protects runs, ctx, wg, covs
	runs []*Link    // the links whose Run has not started yet
	ctx  context.Context
	wg   sync.WaitGroup
	covs []*CoverageTracker // each connection's, for Coverage without the decode lock
}

type poolConn struct {
	link *Link
	keys []string // placed keys, in order
	cost map[string]int
	used int
	cap  int // 0: no cap
}

// NewPool returns a pool with its first connection.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Conn == nil {
		return nil, errors.New("venue: " + cfg.Link.Venue + ": pool config lacks Conn")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.PerAddress {
		if n := cfg.Link.MaxSendsPerSecond; n > 0 && cfg.Link.SendPacer == nil {
			cfg.Link.SendPacer = &Pacer{Every: time.Second / time.Duration(n)}
		}
		if cfg.Link.DialPacer == nil {
			cfg.Link.DialPacer = &Pacer{Every: cfg.Link.DialSpacing}
		}
	}
	p := &Pool{cfg: cfg, where: map[string]int{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.open(); err != nil {
		return nil, err
	}
	return p, nil
}

// open adds a connection. The decode lock must be held.
func (p *Pool) open() (int, error) {
	i := len(p.conns)
	cfg := p.cfg.Link
	cfg.lock, cfg.pool, cfg.conn = &p.mu, p, i
	if cfg.Logger != nil {
		cfg.Logger = cfg.Logger.With("connection", i)
	}
	if r, ok := cfg.Recorder.(ConnRecorder); ok {
		// Called by the recorder (for a new segment's metadata), never
		// with the decode lock held.
		cfg.Recorder = r.ForConn(i, func() []string {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.Keys(i)
		})
	}
	p.cfg.Conn(i, &cfg)
	l, err := NewLink(cfg)
	if err != nil {
		return 0, err
	}
	p.conns = append(p.conns, &poolConn{link: l, cost: map[string]int{}, cap: p.cfg.Capacity})
	p.rmu.Lock()
	defer p.rmu.Unlock()
	p.covs = append(p.covs, cfg.Coverage)
	if p.ctx != nil {
		p.start(l)
	} else {
		p.runs = append(p.runs, l)
	}
	return i, nil
}

// start runs l under the pool's context. p.rmu must be held.
func (p *Pool) start(l *Link) {
	if p.ctx.Err() != nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		l.Run(p.ctx)
	}()
}

// Run runs every connection, and those opened later, until ctx is done.
func (p *Pool) Run(ctx context.Context) {
	p.rmu.Lock()
	p.ctx = ctx
	for _, l := range p.runs {
		p.start(l)
	}
	p.runs = nil
	p.rmu.Unlock()
	<-ctx.Done()
	p.rmu.Lock()
	p.rmu.Unlock() // no start after this: ctx is done
	p.wg.Wait()
}

// Do runs f with the decode lock held.
func (p *Pool) Do(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Len returns the number of connections. The decode lock must be held,
// or the answer may be stale by one.
func (p *Pool) Len() int { return len(p.conns) }

// Link returns connection i's link. The decode lock must be held (a
// connection opening meanwhile may move the slice).
func (p *Pool) Link(i int) *Link { return p.conns[i].link }

// Place puts key on the first connection with room for cost (or on the
// one it is on), opening a connection when none has room. It returns the
// connection, whether it is new (its Connected hook subscribes it), and
// false past MaxConns. The decode lock must be held.
func (p *Pool) Place(key string, cost int) (i int, opened, ok bool) {
	if i, ok := p.where[key]; ok {
		return i, false, true
	}
	i = slices.IndexFunc(p.conns, func(c *poolConn) bool { return c.cap == 0 || c.used+cost <= c.cap })
	if i < 0 {
		if len(p.conns) >= p.cfg.MaxConns {
			return -1, false, false
		}
		var err error
		if i, err = p.open(); err != nil {
			return -1, false, false
		}
		opened = true
	}
	c := p.conns[i]
	c.keys = append(c.keys, key)
	c.cost[key] = cost
	c.used += cost
	p.where[key] = i
	return i, opened, true
}

// Where returns the connection key is on.
func (p *Pool) Where(key string) (int, bool) {
	i, ok := p.where[key]
	return i, ok
}

// Remove frees key's place. The decode lock must be held.
func (p *Pool) Remove(key string) {
	i, ok := p.where[key]
	if !ok {
		return
	}
	delete(p.where, key)
	c := p.conns[i]
	c.used -= c.cost[key]
	delete(c.cost, key)
	c.keys = slices.DeleteFunc(c.keys, func(k string) bool { return k == key })
}

// Keys returns the keys on connection i, in the order placed. The decode
// lock must be held.
func (p *Pool) Keys(i int) []string { return slices.Clone(p.conns[i].keys) }

// Limit lowers connection i's capacity to n (at least 1): the venue
// refused more than that on it. Keys past it stay until removed.
func (p *Pool) Limit(i, n int) { p.conns[i].cap = max(n, 1) }

// Capacity returns connection i's capacity (0: no cap).
func (p *Pool) Capacity(i int) int { return p.conns[i].cap }

// Used returns the cost placed on connection i.
func (p *Pool) Used(i int) int { return p.conns[i].used }

// Coverage returns the venue's coverage over every connection: the
// streams observed on each, and the link up only while every connection
// is (otherwise the least advanced state: idle, connecting, down).
func (p *Pool) Coverage() Coverage {
	p.rmu.Lock()
	trackers := slices.Clone(p.covs)
	p.rmu.Unlock()
	var out Coverage
	for i, t := range trackers {
		c := t.Snapshot()
		if i == 0 {
			out = c
			continue
		}
		out.Resyncs += c.Resyncs
		out.Streams = append(out.Streams, c.Streams...)
		if c.Since.After(out.Since) {
			out.Since = c.Since
		}
		if rank(c.Link) < rank(out.Link) {
			out.Link = c.Link
		}
		if !c.DownSince.IsZero() && (out.DownSince.IsZero() || c.DownSince.Before(out.DownSince)) {
			out.DownSince = c.DownSince
		}
		if c.Error != "" {
			out.Error = c.Error
		}
	}
	if out.Link == LinkUp.String() {
		out.DownSince, out.Error = time.Time{}, ""
	}
	slices.SortFunc(out.Streams, byStream)
	return out
}

// rank orders link states for Pool.Coverage: the venue is as far as its
// least advanced connection.
func rank(s string) int {
	switch s {
	case LinkUp.String():
		return 3
	case LinkConnecting.String():
		return 2
	case LinkDown.String():
		return 1
	}
	return 0
}
