package venue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/fanoutd/fanoutd/notice"
)

// Sink receives what an adapter produces. The daemon's sink assigns Seq,
// keeps its own copy of each book, and fans out; a test's sink records.
//
// Event and Notice are called from the adapter's goroutines, never
// concurrently for one adapter: an adapter serialises its output so that a
// stream's events arrive in order. ev is the sink's only during the call:
// the adapter reuses it (and its level slices) for its next event, so that
// the book path allocates nothing per frame. The sink may change ev
// (Seq) but not its slices' elements; a sink that keeps an event keeps
// ev.Clone(). A sink must not block for long: it is on the path of every
// frame.
type Sink interface {
	Event(ev *Event)
	Notice(n notice.Notice)
}

// Recorder receives every raw frame an adapter reads, with its receive time,
// before it is decoded — including responses the adapter fetched over REST
// that a book depends on, written as the generated frame the venue's
// decoder accepts (see each adapter). frame is only valid during the call.
// A nil Recorder records nothing.
type Recorder interface {
	Frame(venueName string, recv time.Time, frame []byte)
	// Disconnect marks that the link dropped at t (a capture writes an
	// empty line).
	Disconnect(venueName string, t time.Time)
}

// ConnRecorder is a Recorder that keeps the connections of a Pool apart:
// each connection records through ForConn(i, keys) (keys returns the
// symbols placed on it now), so a capture holds one connection's frames
// and disconnects and replays through one decoder, as it ran live.
type ConnRecorder interface {
	Recorder
	ForConn(conn int, keys func() []string) Recorder
}

// Config is what every adapter is built from. Each venue package has
// New(Config) (*Adapter, error) and NewDecoder(Config) for replay.
type Config struct {
	// WSURL is the venue's websocket endpoint. Defaults to the venue's
	// public production endpoint.
	WSURL string
	// RESTURL is the venue's REST base URL, for venues whose books need it
	// (Binance). Defaults to the production endpoint.
	RESTURL string
	// Symbols to subscribe at start, as the venue writes them.
	Symbols []string
	// Channels to subscribe for each symbol. Defaults to all three.
	Channels []Channel
	// Depth is the book depth to subscribe where the venue asks for one
	// (Kraken, Bybit). 0 means the adapter's default.
	Depth int
	// Sink receives events and notices. Required.
	Sink Sink
	// Recorder receives raw frames; nil records nothing.
	Recorder Recorder
	// Logger for the adapter's own logs. Defaults to slog.Default().
	Logger *slog.Logger
	// ReadTimeout: a link that delivers nothing (no frame, no pong) for
	// this long is dead and is reconnected. 0 means the venue's own rule
	// (see each adapter); tests set it short.
	ReadTimeout time.Duration
	// PingInterval is how often the adapter sends the venue's keepalive.
	// 0 means the venue's own rule.
	PingInterval time.Duration
}

// Validate checks what every adapter needs of c, with one wording for all
// venues ("<venue>: config: <field>: <what is wrong>"): a Sink, known
// channels, valid symbols, and a Depth of 0 (the adapter's default) or, when
// depths are given, one of them.
func (c *Config) Validate(venueName string, depths ...int) error {
	if c.Sink == nil {
		return fmt.Errorf("%s: config: sink: required", venueName)
	}
	for _, ch := range c.Channels {
		if !ch.Valid() {
			return fmt.Errorf("%s: config: channels: unknown channel %q", venueName, ch)
		}
	}
	for _, s := range c.Symbols {
		if !ValidSymbol(s) {
			return fmt.Errorf("%s: config: symbols: bad symbol %q", venueName, s)
		}
	}
	if c.Depth < 0 || c.Depth > 0 && len(depths) > 0 && !slices.Contains(depths, c.Depth) {
		return fmt.Errorf("%s: config: depth: %d is not one of %v", venueName, c.Depth, depths)
	}
	return nil
}

// ErrBadSymbol is returned, wrapped, by an adapter's Subscribe for a
// symbol it cannot ask for (CheckSymbols).
var ErrBadSymbol = errors.New("bad symbol")

// CheckSymbols is the symbol check of every adapter's Subscribe: the first
// of symbols that is not ValidSymbol, or holds a character of reserved (a
// venue's separators), is an error wrapping ErrBadSymbol,
// "<venue>: bad symbol "<symbol>"".
func CheckSymbols(venueName, reserved string, symbols ...string) error {
	for _, s := range symbols {
		if !ValidSymbol(s) || strings.ContainsAny(s, reserved) {
			return fmt.Errorf("%s: %w %q", venueName, ErrBadSymbol, s)
		}
	}
	return nil
}

// Defaults are one venue's values for the Config fields left zero.
type Defaults struct {
	WSURL, RESTURL string
	ReadTimeout    time.Duration
	PingInterval   time.Duration // 0: the adapter sends no keepalive of its own unless asked
	Depth          int
}

// SetDefaults fills c's zero fields from d: WSURL, RESTURL and Depth when
// empty or 0, ReadTimeout and PingInterval when not positive; Logger
// defaults to slog.Default().
func (c *Config) SetDefaults(d Defaults) {
	if c.WSURL == "" {
		c.WSURL = d.WSURL
	}
	if c.RESTURL == "" {
		c.RESTURL = d.RESTURL
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = d.ReadTimeout
	}
	if c.PingInterval <= 0 {
		c.PingInterval = d.PingInterval
	}
	if c.Depth == 0 {
		c.Depth = d.Depth
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// AddSymbols appends to wanted each of syms it does not hold, once and in
// order, and returns it with the symbols it added: an adapter's wanted
// list, in the order first asked for.
func AddSymbols(wanted []string, syms ...string) (all, added []string) {
	for _, s := range syms {
		if !slices.Contains(wanted, s) {
			wanted = append(wanted, s)
			added = append(added, s)
		}
	}
	return wanted, added
}

// ChannelsOrAll returns c.Channels, or all three channels when none is set.
func (c *Config) ChannelsOrAll() []Channel {
	if len(c.Channels) == 0 {
		return []Channel{Level2, Trades, Ticker}
	}
	return c.Channels
}

// Adapter is one venue's connection: it dials, subscribes, keeps the link
// alive, reconnects, maintains books and emits normalized events and
// notices to the Sink of its Config.
type Adapter interface {
	// Venue returns the venue's name as it appears in streams ("coinbase").
	Venue() string
	// Start launches the adapter's goroutines and returns at once. They run
	// until ctx is done or Stop is called. Start may be called once.
	Start(ctx context.Context) error
	// Stop closes the link and waits for every goroutine the adapter
	// started, or until ctx is done (then it returns ctx.Err() and the
	// goroutines finish on their own).
	Stop(ctx context.Context) error
	// Subscribe adds symbols, on the configured channels. It returns once
	// the request is queued; confirmation arrives as observed coverage, and
	// a refusal as a Refusal notice.
	// A symbol the adapter cannot ask for is an error wrapping
	// ErrBadSymbol (CheckSymbols), and nothing is subscribed.
	Subscribe(symbols ...string) error
	// Unsubscribe removes symbols.
	Unsubscribe(symbols ...string) error
	// Coverage reports what the adapter has observed arriving.
	Coverage() Coverage
}

// Decoder is the frame-level half of an adapter: it turns raw frames into
// events and notices on its sink, keeping books, sequences and checksums.
// The live adapter drives one from its websocket; replay drives one from a
// capture. A Decoder is not safe for concurrent use.
type Decoder interface {
	// Frame decodes one raw frame received at recv. Bad frames are
	// counted and reported through BadFrames (one DataQuality notice per
	// burst) and make the affected books resync; they never
	// panic and never return an error the caller must act on.
	Frame(recv time.Time, frame []byte)
	// LinkDown tells the decoder the link dropped at t: every book it holds
	// is invalid until the venue sends a new snapshot. It emits nothing:
	// the link_down notice is its driver's (the live adapter's, or replay's
	// player on a capture's disconnect line).
	LinkDown(t time.Time)
}
