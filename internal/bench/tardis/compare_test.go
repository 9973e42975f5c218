package tardis_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/replay/replaytest"
)

// The venues tardis-dev reads fanoutd's captures of (its coinbase and
// kraken mappers read other APIs than the ones fanoutd records).
var venues = []string{"binance", "okx", "bybit"}

func capturePath(v string) string {
	return filepath.Join("..", "..", "..", "testdata", "replay", v+".jsonl.gz")
}

// needHarness skips t unless node and the harness's tardis-dev are installed.
func needHarness(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed: the tardis-dev comparison needs Node.js 20+ (docs/protocol.md, Derived streams)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "tardis-dev", "package.json")); err != nil {
		t.Skip("tardis-dev not installed: run `npm ci` in internal/bench/tardis (docs/protocol.md, Derived streams)")
	}
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// fanoutd builds the command once per test binary.
func fanoutd(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tardis-cmp-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "fanoutd")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/fanoutd/fanoutd/cmd/fanoutd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// snap is one book_snapshot or quote message of either side, and marks a
// disconnect (ours: link_down) when disc is set.
type snap struct {
	at         time.Time // microseconds (tardis-dev's resolution)
	bids, asks [][2]float64
	disc       bool
}

func (s snap) String() string {
	if s.disc {
		return "disconnect at " + s.at.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s bids %v asks %v", s.at.Format(time.RFC3339Nano), s.bids, s.asks)
}

func sameLevels(a, b [][2]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s snap) sameBook(o snap) bool { return sameLevels(s.bids, o.bids) && sameLevels(s.asks, o.asks) }

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

func levels(t *testing.T, ls [][2]string) [][2]float64 {
	out := make([][2]float64, len(ls))
	for i, l := range ls {
		out[i] = [2]float64{num(t, l[0]), num(t, l[1])}
	}
	return out
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return at
}

// runOurs exports one derived stream of capture with fanoutd.
func runOurs(t *testing.T, capture, stream string) []byte {
	t.Helper()
	cmd := exec.Command(fanoutd(t), "replay", "--export", "-", "--streams", stream, capture)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fanoutd replay --export: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// runTardis runs the harness on capture with args.
func runTardis(t *testing.T, capture string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", append(append([]string{"run.js"}, args...), capture)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node run.js %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

func lines(b []byte) [][]byte { return bytes.Split(bytes.TrimSpace(b), []byte("\n")) }

// named is a snap of one stream (by channel or computable name); a
// disconnect has no name and belongs to every stream.
type named struct {
	name string
	snap
}

// pick returns the snaps of name, disconnects included.
func pick(ns []named, name string) []snap {
	var out []snap
	for _, n := range ns {
		if n.name == name || n.disc {
			out = append(out, n.snap)
		}
	}
	return out
}

// ourSnaps reads fanoutd's book_snapshot/quote messages, named by channel,
// and its link_down notices.
func ourSnaps(t *testing.T, out []byte) []named {
	var res []named
	for _, l := range lines(out) {
		var m struct {
			Type, Kind, At string
			Stream         string
			Bids, Asks     [][2]string
			Bid, Ask       string
			RecvTime       string `json:"recv_time"`
			BidSize        string `json:"bid_size"`
			AskSize        string `json:"ask_size"`
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		var channel string
		if parts := strings.Split(m.Stream, ":"); len(parts) == 3 {
			channel = parts[1]
		}
		switch {
		case m.Type == "notice" && m.Kind == "link_down":
			res = append(res, named{"", snap{at: parseTime(t, m.At).Truncate(time.Microsecond), disc: true}})
		case m.Type == "book":
			res = append(res, named{channel, snap{at: parseTime(t, m.RecvTime).Truncate(time.Microsecond), bids: levels(t, m.Bids), asks: levels(t, m.Asks)}})
		case m.Type == "quote":
			res = append(res, named{channel, snap{at: parseTime(t, m.RecvTime).Truncate(time.Microsecond),
				bids: levels(t, [][2]string{{m.Bid, m.BidSize}}), asks: levels(t, [][2]string{{m.Ask, m.AskSize}})}})
		}
	}
	return res
}

// tardisSnaps reads the harness's book_snapshot lines, named by their
// computable's name, and its disconnect lines.
func tardisSnaps(t *testing.T, out []byte) []named {
	var res []named
	for _, l := range lines(out) {
		var m struct {
			Type, Name, Timestamp, LocalTimestamp string
			Bids, Asks                            [][2]float64
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		switch m.Type {
		case "disconnect":
			res = append(res, named{"", snap{at: parseTime(t, m.LocalTimestamp), disc: true}})
		case "book_snapshot":
			res = append(res, named{m.Name, snap{at: parseTime(t, m.Timestamp), bids: m.Bids, asks: m.Asks}})
		}
	}
	return res
}

// align applies the three conventions in which tardis-dev's computed book
// snapshots differ from fanoutd's (docs/protocol.md, Derived streams) to ss, the
// snapshots tardis-dev computed at interval (zero: the same depth at 0ms):
//   - tardis-dev's computables start afresh at the start and after each
//     disconnect, and emit their first snapshot at once, stamped with that
//     change's time; fanoutd emits it at the end of its interval, holding
//     the book then. So the first snapshot of a session moves to its
//     interval's end (where a later one of tardis-dev's may replace it).
//   - after a disconnect tardis-dev emits that first snapshot even when it
//     equals the last one before the drop; fanoutd, continuing the stream,
//     emits only a change.
//   - at a disconnect tardis-dev drops the interval in progress; fanoutd
//     closes it at its end with the book before the drop, when it changed
//     since the last snapshot and the capture goes on.
//
// Disconnect marks are removed.
func align(ss, zero []snap, interval time.Duration) (out []snap, st alignStats) {
	emit := func(s snap) {
		if n := len(out); n > 0 && out[n-1].at.Equal(s.at) {
			out[n-1] = s
			return
		}
		out = append(out, s)
	}
	fresh := true
	for i := 0; i < len(ss); i++ {
		s := ss[i]
		if s.disc {
			fresh = true
			if interval > 0 && len(out) > 0 {
				// The book before the drop, if a session follows.
				var before *snap
				after := false
				for j := range zero {
					if zero[j].disc {
						continue
					}
					if !zero[j].at.After(s.at) {
						before = &zero[j]
					} else {
						after = true
						break
					}
				}
				if after && before != nil && !out[len(out)-1].sameBook(*before) {
					st.closed++
					emit(snap{at: s.at.Truncate(interval).Add(interval), bids: before.bids, asks: before.asks})
				}
			}
			continue
		}
		if fresh {
			fresh = false
			if n := len(out); n > 0 && out[n-1].sameBook(s) {
				st.repeated++
				continue
			}
			if interval > 0 && !s.at.Equal(s.at.Truncate(interval)) {
				st.moved++
				s.at = s.at.Truncate(interval).Add(interval)
			}
		}
		emit(s)
	}
	return out, st
}

// alignStats counts what align did, by convention.
type alignStats struct{ moved, repeated, closed int }

func withoutMarks(ss []snap) []snap {
	var out []snap
	for _, s := range ss {
		if !s.disc {
			out = append(out, s)
		}
	}
	return out
}

// compareSnaps fails t at the first difference.
func compareSnaps(t *testing.T, ours, theirs []snap) {
	t.Helper()
	for i := 0; i < len(ours) && i < len(theirs); i++ {
		if !ours[i].at.Equal(theirs[i].at) || !ours[i].sameBook(theirs[i]) {
			t.Fatalf("message %d differs:\nfanoutd    %v\ntardis-dev %v", i, ours[i], theirs[i])
		}
	}
	if len(ours) != len(theirs) {
		t.Fatalf("fanoutd %d messages, tardis-dev %d", len(ours), len(theirs))
	}
}

// TestBookSnapshotsMatchTardis compares fanoutd's book_snapshot_<d>_<i> and
// quote with tardis-dev's computeBookSnapshots over the receive time, on
// the testdata captures: same levels, prices, sizes and emission times,
// once the two conventions align describes are applied.
func TestBookSnapshotsMatchTardis(t *testing.T) {
	needHarness(t)
	cases := []struct {
		channel  string
		args     []string
		zero     string // the same depth at 0ms
		interval time.Duration
	}{
		{"book_snapshot_10_0ms", []string{"--book-snapshot", "10_0ms"}, "book_snapshot_10_0ms", 0},
		{"book_snapshot_1_1ms", []string{"--book-snapshot", "1_1ms", "--book-snapshot", "1_0ms"}, "book_snapshot_1_0ms", time.Millisecond},
		{"book_snapshot_5_10ms", []string{"--book-snapshot", "5_10ms", "--book-snapshot", "5_0ms"}, "book_snapshot_5_0ms", 10 * time.Millisecond},
		{"book_snapshot_25_100ms", []string{"--book-snapshot", "25_100ms", "--book-snapshot", "25_0ms"}, "book_snapshot_25_0ms", 100 * time.Millisecond},
		{"quote", []string{"--quote"}, "quote", 0},
	}
	for _, v := range venues {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			capture := capturePath(v)
			var streams []string
			args := []string{"--time", "local"}
			for _, c := range cases {
				streams = append(streams, v+":"+c.channel+":*")
				args = append(args, c.args...)
			}
			ourAll := ourSnaps(t, runOurs(t, capture, strings.Join(streams, ",")))
			theirAll := tardisSnaps(t, runTardis(t, capture, args...))
			for _, c := range cases {
				t.Run(c.channel, func(t *testing.T) {
					ours := withoutMarks(pick(ourAll, c.channel))
					raw := pick(theirAll, c.channel)
					theirs, st := align(raw, pick(theirAll, c.zero), c.interval)
					if len(ours) < 3 {
						t.Fatalf("fanoutd wrote %d messages", len(ours))
					}
					compareSnaps(t, ours, theirs)
					t.Logf("%d messages equal; tardis-dev wrote %d: first of a session moved to its interval's end %d, repeated after a disconnect %d; interval closed at a disconnect (fanoutd only) %d",
						len(ours), len(withoutMarks(raw)), st.moved, st.repeated, st.closed)
				})
			}
		})
	}
}

// tradeFrame returns a trade frame of venue v as its websocket sends it,
// venue time at.
func tradeFrame(v string, id int, at time.Time, price, size string, buy bool) string {
	ms := at.UnixMilli()
	switch v {
	case "binance": // "m": the buyer made, so the taker sold
		return fmt.Sprintf(`{"stream":"btcusdt@trade","data":{"e":"trade","E":%d,"s":"BTCUSDT","t":%d,"p":%q,"q":%q,"T":%d,"m":%t,"M":true}}`, ms, id, price, size, ms, !buy)
	case "okx":
		side := "sell"
		if buy {
			side = "buy"
		}
		return fmt.Sprintf(`{"arg":{"channel":"trades","instId":"BTC-USDT"},"data":[{"instId":"BTC-USDT","tradeId":"%d","px":%q,"sz":%q,"side":%q,"ts":"%d","count":"1","source":"0","seqId":%d}]}`, id, price, size, side, ms, id)
	case "bybit":
		side := "Sell"
		if buy {
			side = "Buy"
		}
		return fmt.Sprintf(`{"topic":"publicTrade.BTCUSDT","ts":%d,"type":"snapshot","data":[{"i":"%d","T":%d,"p":%q,"v":%q,"S":%q,"seq":%d,"s":"BTCUSDT","BT":false,"RPI":false}]}`, ms, id, ms, price, size, side, id)
	}
	panic(v)
}

// withTrades writes v's testdata capture to dir with a trade after every
// third frame, at that frame's receive time; the trade's venue time is its
// receive time in whole milliseconds, so tardis-dev, which buckets by venue
// time, and fanoutd, by receive time, put it in the same interval of any
// whole number of milliseconds. Prices and sizes are random (fixed seed).
func withTrades(t *testing.T, v, dir string) string {
	t.Helper()
	in, err := replay.Open(capturePath(v))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(dir, v+"-trades.jsonl.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Comment = replay.MetaComment(in.Meta)
	w := replay.NewWriter(zw)
	base := map[string]int{"binance": 10000, "okx": 302430, "bybit": 300000}[v] // price in ticks
	scale := map[string]int32{"binance": -2, "okx": -1, "bybit": -1}[v]
	rng := rand.New(rand.NewPCG(1, uint64(len(v))))
	n := 0
	for {
		r, err := in.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Disconnect {
			err = w.Disconnect()
		} else {
			err = w.Frame(r.Time, r.Frame)
			if n++; err == nil && n%3 == 0 {
				price := decimal.New(int64(base+rng.IntN(41)-20), scale).String()
				size := decimal.New(int64(1+rng.IntN(50000)), -4).String()
				err = w.Frame(r.Time, []byte(tradeFrame(v, n, r.Time.Truncate(time.Millisecond), price, size, rng.IntN(2) == 0)))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// bar is one trade bar of either side.
type bar struct {
	end                           time.Time
	open, high, low, close        float64
	volume, buyVolume, sellVolume float64
	trades                        int
	first, last                   time.Time
	gap                           bool
}

// ourBars reads fanoutd's bars of channel.
func ourBars(t *testing.T, out []byte, channel string) []bar {
	var res []bar
	for _, l := range lines(out) {
		var m struct {
			Type, Stream, End, Open, High, Low, Close, Volume string
			BuyVolume                                         string `json:"buy_volume"`
			SellVolume                                        string `json:"sell_volume"`
			Trades                                            int
			First                                             string `json:"first_trade_time"`
			Last                                              string `json:"last_trade_time"`
			Gap                                               bool
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if m.Type != "trade_bar" || strings.Split(m.Stream, ":")[1] != channel {
			continue
		}
		res = append(res, bar{end: parseTime(t, m.End), open: num(t, m.Open), high: num(t, m.High), low: num(t, m.Low), close: num(t, m.Close),
			volume: num(t, m.Volume), buyVolume: num(t, m.BuyVolume), sellVolume: num(t, m.SellVolume), trades: m.Trades,
			first: parseTime(t, m.First), last: parseTime(t, m.Last), gap: m.Gap})
	}
	return res
}

// tardisBars reads the harness's bars named name.
func tardisBars(t *testing.T, out []byte, name string) []bar {
	var res []bar
	for _, l := range lines(out) {
		var m struct {
			Type, Name, Timestamp, OpenTimestamp, CloseTimestamp string
			Open, High, Low, Close                               float64
			Volume, BuyVolume, SellVolume                        float64
			Trades                                               int
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if m.Type != "trade_bar" || m.Name != name {
			continue
		}
		res = append(res, bar{end: parseTime(t, m.Timestamp), open: m.Open, high: m.High, low: m.Low, close: m.Close,
			volume: m.Volume, buyVolume: m.BuyVolume, sellVolume: m.SellVolume, trades: m.Trades,
			first: parseTime(t, m.OpenTimestamp), last: parseTime(t, m.CloseTimestamp)})
	}
	return res
}

// near compares tardis-dev's float sums with fanoutd's exact ones.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a)) }

func (b bar) equal(o bar) bool {
	return b.end.Equal(o.end) && b.open == o.open && b.high == o.high && b.low == o.low && b.close == o.close &&
		near(b.volume, o.volume) && near(b.buyVolume, o.buyVolume) && near(b.sellVolume, o.sellVolume) &&
		b.trades == o.trades && b.first.Equal(o.first) && b.last.Equal(o.last)
}

// TestTradeBarsMatchTardis compares fanoutd's trade_bar_<i> with
// tardis-dev's computeTradeBars (kind time, its own convention: venue time)
// on the testdata captures with trades added (withTrades). Every bar
// fanoutd writes without "gap" equals tardis-dev's bar of that interval
// (volumes to 1e-9: tardis-dev sums floats); a bar spanning a link drop is
// fanoutd's alone ("gap":true), or tardis-dev's holds only the trades after
// the drop: it discards its bar in progress at a disconnect.
func TestTradeBarsMatchTardis(t *testing.T) {
	needHarness(t)
	dir := t.TempDir()
	for _, v := range venues {
		capture := withTrades(t, v, dir)
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			intervals := []string{"1ms", "10ms", "100ms"}
			var streams []string
			var args []string
			for _, iv := range intervals {
				streams = append(streams, v+":trade_bar_"+iv+":*")
				args = append(args, "--trade-bar", iv)
			}
			ourOut, theirOut := runOurs(t, capture, strings.Join(streams, ",")), runTardis(t, capture, args...)
			for _, iv := range intervals {
				t.Run("trade_bar_"+iv, func(t *testing.T) {
					ours := ourBars(t, ourOut, "trade_bar_"+iv)
					theirs := map[int64]bar{}
					for _, b := range tardisBars(t, theirOut, "trade_bar_"+iv) {
						theirs[b.end.UnixNano()] = b
					}
					if len(ours) < 3 {
						t.Fatalf("fanoutd wrote %d bars", len(ours))
					}
					gaps := 0
					for _, b := range ours {
						tb, ok := theirs[b.end.UnixNano()]
						delete(theirs, b.end.UnixNano())
						if b.gap {
							gaps++
							if ok && tb.trades >= b.trades {
								t.Fatalf("gap bar ending %v: fanoutd %d trades, tardis-dev %d", b.end, b.trades, tb.trades)
							}
							continue
						}
						if !ok {
							t.Fatalf("fanoutd's bar ending %v: none of tardis-dev's\n%+v", b.end, b)
						}
						if !b.equal(tb) {
							t.Fatalf("bar ending %v differs:\nfanoutd    %+v\ntardis-dev %+v", b.end, b, tb)
						}
					}
					if len(theirs) > 0 {
						t.Fatalf("tardis-dev has %d bars fanoutd has not: %+v", len(theirs), theirs)
					}
					if gaps == 0 {
						t.Fatalf("no gap bar: the capture's link drop is not in a bar")
					}
					t.Logf("%d bars equal, %d spanning the link drop", len(ours)-gaps, gaps)
				})
			}
		})
	}
}

var largeDir = flag.String("large", "", "write the 200,000-frame captures of the Performance section into this directory (TestLargeCaptures)")

// TestLargeCaptures writes, with -large DIR, each venue's testdata capture
// 20 times into one file, each copy shifted to follow the one before (the
// captures end with a disconnect, so each copy replays as a new session),
// and for Binance, OKX and Bybit a real-shaped capture of 200,000 level2
// updates of 5–7 level changes each (writeRealCapture): the captures of
// docs/performance.md.
func TestLargeCaptures(t *testing.T) {
	if *largeDir == "" {
		t.Skip("run with -args -large DIR to write the 200,000-frame captures")
	}
	for _, v := range []string{"binance", "bybit", "coinbase", "kraken", "okx"} {
		path := filepath.Join(*largeDir, v+"-200k.jsonl.gz")
		frames := replaytest.ReadCapture(t, capturePath(v)).WriteShifted(t, path, 0, 20)
		t.Logf("%s: %d frames", path, frames)
	}
	for _, v := range venues {
		path := filepath.Join(*largeDir, v+"-real-200k.jsonl.gz")
		writeRealCapture(t, v, path, 200_000)
		t.Logf("%s: 200,000 updates after the snapshot", path)
	}
}
