package okx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/wsconn"
)

// Defaults for Config fields left zero.
const (
	// DefaultWSURL is OKX's production public endpoint.
	DefaultWSURL = "wss://ws.okx.com:8443/ws/v5/public"
	// DefaultPingInterval: OKX drops a link with no traffic for 30 s; the
	// adapter sends text "ping" this often.
	DefaultPingInterval = 20 * time.Second
	// DefaultReadTimeout: a link silent this long (the ping unanswered for
	// 10 s) is dead.
	DefaultReadTimeout = 30 * time.Second

	// readLimit bounds one frame. A 400-level books snapshot is about
	// 40 KB; the limit leaves room for many times that.
	readLimit = 8 << 20
	// dialSpacing keeps connection attempts under OKX's 3 per second per IP.
	dialSpacing = 350 * time.Millisecond
	// ackDeadline is how long the initial subscriptions may stay
	// unanswered before the link is declared up anyway (with the missing
	// acks named), so a venue that never acks cannot hold link_up back.
	ackDeadline = 10 * time.Second
)

// Errors New and Start return.
var (
	ErrStarted    = venue.ErrStarted // wrapped by a second Start
	ErrBadSymbol  = errors.New("okx: bad symbol")
	ErrNotStarted = errors.New("okx: adapter not started")
)

// Adapter is the OKX v5 public market-data adapter: one websocket, the
// books/trades/tickers channels for each symbol, books kept by a Decoder.
type Adapter struct {
	cfg  venue.Config // defaults resolved
	log  *slog.Logger
	link *venue.Link
	dec  *Decoder // under the link's decode lock
	life venue.Lifecycle

	mu      sync.Mutex // protects symbols
	symbols []string   // wanted, in order of Subscribe

	// Under the link's decode lock: the current connection's initial
	// "channel\x00instId" subscriptions awaiting an ack, and when it opened.
	pending map[string]bool
	start   time.Time
}

var _ venue.Adapter = (*Adapter)(nil)

// New builds an adapter from cfg. It dials nothing until Start.
func New(cfg venue.Config) (*Adapter, error) {
	if err := cfg.Validate(Name); err != nil {
		return nil, err
	}
	if cfg.WSURL == "" {
		cfg.WSURL = DefaultWSURL
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = DefaultPingInterval
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Channels = cfg.ChannelsOrAll()
	a := &Adapter{cfg: cfg, log: cfg.Logger.With("venue", Name), pending: map[string]bool{}}
	for _, s := range cfg.Symbols {
		if !slices.Contains(a.symbols, s) {
			a.symbols = append(a.symbols, s)
		}
	}
	a.dec = NewDecoder(cfg)
	a.dec.hooks = hooks{resync: a.resync, ack: a.ack, refused: a.refused, forced: a.forced, data: a.data}
	ping := []byte("ping")
	var err error
	a.link, err = venue.NewLink(venue.LinkConfig{
		Venue: Name, URL: cfg.WSURL, Dial: wsconn.Dialer(readLimit),
		ReadTimeout: cfg.ReadTimeout, PingInterval: cfg.PingInterval, Ping: func() []byte { return ping },
		DialSpacing: dialSpacing,
		Decoder:     a.dec, Sink: cfg.Sink, Recorder: cfg.Recorder, Coverage: a.dec.Coverage(), Logger: a.log,
		Connected: a.connected, Tick: a.tick,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

func checkSymbol(s string) error {
	if !venue.ValidSymbol(s) {
		return fmt.Errorf("%w %q", ErrBadSymbol, s)
	}
	return nil
}

// Venue returns "okx".
func (a *Adapter) Venue() string { return Name }

// Coverage reports the link state and the streams observed on it.
func (a *Adapter) Coverage() venue.Coverage { return a.dec.Coverage().Snapshot() }

// Start launches the adapter's goroutines and returns at once; they run
// until ctx is done or Stop is called (venue.Lifecycle).
func (a *Adapter) Start(ctx context.Context) error {
	return a.life.Start(ctx, Name, a.link.Run)
}

// Stop closes the link and waits for the adapter's goroutines, or until
// ctx is done (then it returns ctx.Err() and they finish on their own).
func (a *Adapter) Stop(ctx context.Context) error { return a.life.Stop(ctx) }

// Subscribe adds symbols on the configured channels. A symbol OKX refuses
// comes back as a Refusal notice and is dropped from the wanted set.
func (a *Adapter) Subscribe(symbols ...string) error {
	for _, s := range symbols {
		if err := checkSymbol(s); err != nil {
			return err
		}
	}
	// Under the decode lock, so a connection opening meanwhile subscribes
	// each symbol once: here or in connected.
	a.link.Do(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, s := range symbols {
			if slices.Contains(a.symbols, s) {
				continue
			}
			a.symbols = append(a.symbols, s)
			a.link.Send(request("subscribe", a.cfg.Channels, s))
		}
	})
	return nil
}

// Unsubscribe removes symbols; their streams leave coverage at once.
func (a *Adapter) Unsubscribe(symbols ...string) error {
	a.link.Do(func() {
		now := time.Now()
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, s := range symbols {
			i := slices.Index(a.symbols, s)
			if i < 0 {
				continue
			}
			a.symbols = slices.Delete(a.symbols, i, i+1)
			a.link.Send(request("unsubscribe", a.cfg.Channels, s))
			a.dec.forget(s, now)
		}
	})
	return nil
}

// request builds {"op":op,"args":[{"channel":…,"instId":sym},…]}. The
// symbol was checked to need no escaping.
func request(op string, chans []venue.Channel, sym string) []byte {
	b := make([]byte, 0, 64+48*len(chans))
	b = append(b, `{"op":"`...)
	b = append(b, op...)
	b = append(b, `","args":[`...)
	for i, c := range chans {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"channel":"`...)
		b = append(b, okxChannel(c)...)
		b = append(b, `","instId":"`...)
		b = append(b, sym...)
		b = append(b, `"}`...)
	}
	return append(b, "]}"...)
}

// Link hooks.

// connected subscribes every wanted symbol on a new connection; the link is
// up once every subscription is answered (or data flows).
func (a *Adapter) connected(now time.Time) bool {
	clear(a.pending)
	a.start = now
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, sym := range a.symbols {
		for _, c := range a.cfg.Channels {
			a.pending[okxChannel(c)+"\x00"+sym] = true
		}
		a.link.Send(request("subscribe", a.cfg.Channels, sym))
	}
	return len(a.pending) == 0
}

// tick declares the link up when acks are overdue but frames arrive.
func (a *Adapter) tick(now time.Time) string {
	a.link.Do(func() {
		if a.link.IsUp() || now.Sub(a.start) <= ackDeadline {
			return
		}
		var missing []string
		for k := range a.pending {
			missing = append(missing, strings.Replace(k, "\x00", ":", 1))
		}
		a.log.Warn("okx subscriptions not acknowledged", "args", missing)
		clear(a.pending)
		a.link.Up(now)
	})
	return ""
}

// Decoder hooks, called under the link's decode lock.

func (a *Adapter) resync(instID string) {
	// OKX's procedure: unsubscribe the books channel, subscribe again; the
	// subscription starts with a fresh snapshot.
	ch := []venue.Channel{venue.Level2}
	a.link.Send(request("unsubscribe", ch, instID))
	a.link.Send(request("subscribe", ch, instID))
}

func (a *Adapter) ack(op, channel, instID string) {
	if op != "subscribe" {
		return
	}
	delete(a.pending, channel+"\x00"+instID)
	a.maybeUp(time.Now())
}

func (a *Adapter) refused(channel, instID string) {
	if instID == "" {
		return
	}
	a.mu.Lock()
	a.symbols = slices.DeleteFunc(a.symbols, func(s string) bool { return s == instID })
	a.mu.Unlock()
	for k := range a.pending {
		if strings.HasSuffix(k, "\x00"+instID) {
			delete(a.pending, k)
		}
	}
	a.maybeUp(time.Now())
}

func (a *Adapter) forced(code, msg string) {
	a.link.Drop("venue notice " + code + ": " + msg)
}

func (a *Adapter) data() {
	// The venue is serving pushes: whatever acks are missing, the link is up.
	clear(a.pending)
	a.maybeUp(time.Now())
}

// maybeUp marks the link up once every initial subscription is answered.
func (a *Adapter) maybeUp(now time.Time) {
	if len(a.pending) == 0 && a.link.Connected() {
		a.link.Up(now)
	}
}
