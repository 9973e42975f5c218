package ui_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/internal/ui/bidi"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

var updateDocs = flag.Bool("update-docs", false, "write the page's screenshot for docs/operations.md to docs/operator-page.png")

// page is one browser tab the tests drive: headless Chromium over the
// DevTools protocol (chromedp) or headless Firefox over WebDriver BiDi.
type page interface {
	navigate(t *testing.T, url string)
	// eval evaluates js in the page into out, through JSON.
	eval(t *testing.T, js string, out any)
	// screenshot writes the page as name.png into the test's artifact
	// directory (go test -artifacts keeps it) and names it in the log.
	screenshot(t *testing.T, name string) string
	// viewport sets the page's viewport in CSS pixels.
	viewport(t *testing.T, width, height int)
	// keys types keys into the focused element, each key pressed and
	// released in turn ("\t" is Tab, "\r" Enter).
	keys(t *testing.T, keys string)
}

// browsers are the browsers the cross-browser tests run in, each as a
// subtest that skips when its browser is not installed.
var browsers = []struct {
	name string
	open func(*testing.T) page
}{
	{"chromium", func(t *testing.T) page { return chromium(t) }},
	{"firefox", func(t *testing.T) page { return firefox(t) }},
}

// eachBrowser runs f in a subtest per browser.
func eachBrowser(t *testing.T, f func(t *testing.T, p page)) {
	for _, b := range browsers {
		t.Run(b.name, func(t *testing.T) { f(t, b.open(t)) })
	}
}

type chromiumPage struct{ ctx context.Context }

// chromium starts headless Chromium for t (skipping t when it is not
// installed) at 1280×800, and returns one tab.
func chromium(t *testing.T) *chromiumPage {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("chromium is not installed (apt-get install chromium): the browser tests need a real headless Chromium; skipped")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser (no timeout on this first call: it would stop the browser)
		t.Fatalf("chromium %s: %v", bin, err)
	}
	return &chromiumPage{ctx}
}

func (c *chromiumPage) navigate(t *testing.T, url string) { run(t, c.ctx, chromedp.Navigate(url)) }

func (c *chromiumPage) eval(t *testing.T, js string, out any) {
	t.Helper()
	s := value(t, c.ctx, chromedp.Evaluate[string](`JSON.stringify((`+js+`)) ?? 'null'`))
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
}

func (c *chromiumPage) screenshot(t *testing.T, name string) string {
	t.Helper()
	return keep(t, name, value(t, c.ctx, chromedp.FullScreenshot(100)))
}

func (c *chromiumPage) viewport(t *testing.T, w, h int) {
	t.Helper()
	run(t, c.ctx, chromedp.EmulateViewport(int64(w), int64(h)))
}

func (c *chromiumPage) keys(t *testing.T, keys string) {
	t.Helper()
	run(t, c.ctx, chromedp.KeyEvent(keys))
}

type firefoxPage struct{ b *bidi.Browser }

// firefox starts headless Firefox for t (skipping t when it is not
// installed) at 1280×800 with extra prefs, and returns its tab.
func firefox(t *testing.T, extra ...map[string]any) *firefoxPage {
	t.Helper()
	bin := bidi.Find()
	if bin == "" {
		t.Skip("firefox is not installed (apt-get install firefox-esr): the browser tests in Firefox need a real headless Firefox; skipped")
	}
	// Generous: Firefox took 10 s to be ready at a load average of 29.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var prefs map[string]any
	if len(extra) > 0 {
		prefs = extra[0]
	}
	start := time.Now()
	b, err := bidi.Start(ctx, bin, t.TempDir(), 1280, 800, prefs)
	if err != nil {
		t.Fatalf("firefox %s: %v", bin, err)
	}
	t.Cleanup(b.Close)
	t.Logf("firefox %s ready in %v", b.Version, time.Since(start).Round(time.Millisecond))
	return &firefoxPage{b}
}

func (f *firefoxPage) navigate(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.b.Navigate(ctx, url); err != nil {
		t.Fatal(err)
	}
}

func (f *firefoxPage) eval(t *testing.T, js string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.b.Eval(ctx, js, out); err != nil {
		t.Fatal(err)
	}
}

func (f *firefoxPage) screenshot(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	png, err := f.b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return keep(t, name, png)
}

func (f *firefoxPage) viewport(t *testing.T, w, h int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.b.SetViewport(ctx, w, h); err != nil {
		t.Fatal(err)
	}
}

func (f *firefoxPage) keys(t *testing.T, keys string) {
	t.Helper()
	var ks []string
	for _, r := range keys {
		switch r {
		case '\t':
			ks = append(ks, "\uE004")
		case '\r', '\n':
			ks = append(ks, "\uE007")
		default:
			ks = append(ks, string(r))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.b.Keys(ctx, ks...); err != nil {
		t.Fatal(err)
	}
}

// keep writes png as name.png into the test's artifact directory and
// names it in the log.
func keep(t *testing.T, name string, png []byte) string {
	t.Helper()
	p := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// run runs chromedp steps, failing t on error or after 30 s.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// value runs one chromedp action for its value, failing t on error.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(cctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitFor is testutil.WaitFor, the one polling helper of the tests.
var waitFor = testutil.WaitFor

func getJSON(t *testing.T, u string, out any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

type book struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Valid  bool   `json:"valid"`
	// Snapshots and Updates count the book events the page applied.
	Snapshots int         `json:"snapshots"`
	Updates   int         `json:"updates"`
	Bids      [][2]string `json:"bids"`
	Asks      [][2]string `json:"asks"`
}

// replayDaemon serves the five testdata captures as fast as it can, from
// the first subscription on, and keeps serving the final books (Hold).
func replayDaemon(t *testing.T) string {
	t.Helper()
	cfg, err := config.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClaimCheck.Stores[0].Path = t.TempDir()
	found := map[string][]string{}
	var srcs []replay.Source
	for _, v := range venues.Names() {
		src := replay.FileSource(filepath.Join("..", "..", "testdata", "replay", v+".jsonl.gz"), "")
		f, err := src.Open()
		if err != nil {
			t.Fatal(err)
		}
		found[v] = f.Meta.Subscriptions
		f.Close()
		src.Venue = v
		srcs = append(srcs, src)
	}
	if err := cfg.ForCaptures(found); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.DiscardHandler)
	go func() {
		done <- daemon.Replay(ctx, cfg, daemon.ReplayOptions{Sources: srcs, Speed: 0, Wait: 1, Hold: true, Logger: log}, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("replay: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestPageShowsTheReplayedBook: the page, opened on a level2 stream of a
// daemon replaying the testdata captures, applies the snapshot and every
// update it receives over the websocket API; once the replay is over, its
// seq and its book (in full, and the top levels it shows as text) equal
// /v1/books for that stream. Then every venue's level2 stream, opened
// afresh, shows /v1/books too; and the overview lists the five venues. In
// Chromium and in Firefox.
func TestPageShowsTheReplayedBook(t *testing.T) { eachBrowser(t, testReplayedBook) }

func testReplayedBook(t *testing.T, pg page) {
	base := replayDaemon(t)
	const stream = "coinbase:level2:BTC-USD"
	pg.navigate(t, base+"/?stream="+url.QueryEscape(stream))

	compare := func(stream string) {
		t.Helper()
		v, sym, _ := strings.Cut(strings.Replace(stream, ":level2:", "\x00", 1), "\x00")
		var want, got book
		var stable int
		var last uint64
		waitFor(t, 20*time.Second, stream+": the page's book never equalled /v1/books at the same seq", func() bool {
			if code := getJSON(t, base+"/v1/books/"+v+"/"+sym, &want); code != http.StatusOK {
				if testing.Verbose() {
					var st string
					pg.eval(t, `document.querySelector('#ws-state').textContent + ' | ' + document.querySelector('#notices').textContent + ' | ' + document.querySelector('#status').textContent`, &st)
					t.Logf("%s: /v1/books: %d; page: %s", stream, code, st)
				}
				return false
			}
			if want.Seq == last {
				stable++
			} else {
				stable, last = 0, want.Seq
			}
			pg.eval(t, `window.fanoutdView()`, &got)
			if testing.Verbose() && stable == 4 {
				t.Logf("%s: /v1/books at seq %d; the page at seq %d (valid %v)", stream, want.Seq, got.Seq, got.Valid)
			}
			return stable >= 4 && got.Valid && got.Seq == want.Seq
		})
		if !slices.Equal(got.Bids, want.Bids) || !slices.Equal(got.Asks, want.Asks) {
			t.Fatalf("%s at seq %d: the page's book differs from /v1/books:\npage bids %v\nwant bids %v\npage asks %v\nwant asks %v",
				stream, want.Seq, head(got.Bids), head(want.Bids), head(got.Asks), head(want.Asks))
		}
		// What is shown as text: the top 20 of each side, and the seq.
		var shown struct {
			Seq  string      `json:"seq"`
			Bids [][2]string `json:"bids"`
			Asks [][2]string `json:"asks"`
		}
		waitFor(t, 2*time.Second, stream+": the seq shown", func() bool {
			pg.eval(t, `({seq: document.querySelector('#seq').dataset.seq,
				bids: [...document.querySelectorAll('#book-bids tbody tr')].map(r => [r.cells[1].textContent, r.cells[0].textContent]),
				asks: [...document.querySelectorAll('#book-asks tbody tr')].map(r => [r.cells[0].textContent, r.cells[1].textContent])})`, &shown)
			return shown.Seq == strconv.FormatUint(want.Seq, 10)
		})
		if !slices.Equal(shown.Bids, want.Bids[:min(20, len(want.Bids))]) || !slices.Equal(shown.Asks, want.Asks[:min(20, len(want.Asks))]) {
			t.Fatalf("%s: the book shown differs from /v1/books:\nshown bids %v\nwant %v\nshown asks %v\nwant %v", stream, shown.Bids, head(want.Bids), shown.Asks, head(want.Asks))
		}
		t.Logf("%s: the page shows /v1/books at seq %d (%d bids, %d asks; it applied %d snapshots and %d updates)",
			stream, want.Seq, len(want.Bids), len(want.Asks), got.Snapshots, got.Updates)
	}
	compare(stream)
	p := pg.screenshot(t, "stream-coinbase")
	if _, chromium := pg.(*chromiumPage); chromium && *updateDocs {
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "operator-page.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Every venue's level2 streams, as the coverage lists them.
	var cov []venue.Coverage
	getJSON(t, base+"/v1/coverage", &cov)
	if len(cov) != 5 {
		t.Fatalf("/v1/coverage lists %d venues, want 5", len(cov))
	}
	for _, c := range cov {
		for _, s := range c.Streams {
			if s.Stream.Channel() != venue.Level2 || s.Stream == stream {
				continue
			}
			pg.navigate(t, base+"/?stream="+url.QueryEscape(string(s.Stream)))
			compare(string(s.Stream))
			break
		}
	}
	var venuesShown []string
	waitFor(t, 3*time.Second, "the venue table lists the five venues", func() bool {
		pg.eval(t, `[...document.querySelectorAll('#venue-table tbody tr')].map(r => r.dataset.venue)`, &venuesShown)
		return len(venuesShown) == 5
	})
	// Ages are on the replay's clock: a stream that just had an event is
	// seconds old, not as old as the capture.
	var ages []string
	waitFor(t, 3*time.Second, "the stream table lists ages", func() bool {
		pg.eval(t, `[...document.querySelectorAll('#stream-table tbody tr td:nth-of-type(1)')].map(td => td.textContent)`, &ages)
		return len(ages) > 0
	})
	for _, a := range ages {
		if !regexp.MustCompile(`^\d+(\.\d)? s$`).MatchString(a) {
			t.Errorf("a replayed stream's last event shows as %q ago, want seconds on the replay's clock", a)
		}
	}
	pg.screenshot(t, "stream-last")
}

func head(ls [][2]string) [][2]string { return ls[:min(5, len(ls))] }

// TestPageShowsAStalledSubscriber: a subscriber that stops reading shows
// as dropping on the page (updated at least once a second), and as no
// longer dropping once it reads again and delivery resumed. In Chromium
// and in Firefox.
func TestPageShowsAStalledSubscriber(t *testing.T) { eachBrowser(t, testStalledSubscriber) }

func testStalledSubscriber(t *testing.T, pg page) {
	var src *testsource.Source
	v := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) { src = testsource.New("coinbase", c); return src, nil }}
	d := daemontest.Start(t, "venues:\n  coinbase:\n    symbols: [BTC-USD]\n    max_queue_len: 50\nwebsocket:\n  send_buffer_bytes: 4096\n  write_delay: 0s\n",
		daemon.Options{Venues: []venues.Venue{v}})
	base := d.URL("http")
	stream := venue.Stream("coinbase:trades:BTC-USD")

	// The stalled one: a named subscriber with a small receive buffer.
	dialer := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}, ReadBufferSize: 1024}
	ws, _, err := dialer.Dial(d.URL("ws")+"/v1/stream?name=stalled", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []venue.Stream{stream}})
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := ws.ReadMessage(); err != nil { // the ack
		t.Fatal(err)
	}
	pg.navigate(t, base+"/#subscribers")
	row := func() string {
		var s string
		pg.eval(t, `(r => r ? r.dataset.dropping : '')(document.querySelector('#sub-table tr[data-id="stalled"]'))`, &s)
		return s
	}
	waitFor(t, 5*time.Second, "the page lists the subscriber", func() bool { return row() == "false" })

	var mu sync.Mutex
	seq := 0
	publish := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		for range n {
			seq++
			src.Publish(&venue.Event{Kind: venue.KindTrade, Stream: stream, TradeID: strconv.Itoa(seq),
				Price: decimal.New(int64(50000+seq%100), 0), Size: decimal.New(1, -2), Side: venue.SideBuy, RecvTime: time.Now()})
		}
	}
	took := waitFor(t, 10*time.Second, "the page never showed the stalled subscriber dropping", func() bool {
		publish(200)
		return row() == "true"
	})
	t.Logf("shown dropping %v after the publishing began", took)
	pg.screenshot(t, "subscriber-dropping")

	// Read again; a trickle of events lets the feed see the queue drained.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				publish(1)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		for {
			ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if strings.Contains(string(msg), `"kind":"resumed"`) {
				for { // keep reading
					if _, _, err := ws.ReadMessage(); err != nil {
						return
					}
				}
			}
		}
	}()
	waitFor(t, 10*time.Second, "the page never showed the subscriber resumed", func() bool { return row() == "false" })
	pg.screenshot(t, "subscriber-resumed")
	ws.Close()
	<-resumed
}

// TestPageShowsALinkDown: the venue table shows a venue's link up, and
// down within 2 s of its venue going away (the mock venue behind a proxy
// that is killed: its connections closed, new ones refused). In Chromium
// and in Firefox.
func TestPageShowsALinkDown(t *testing.T) { eachBrowser(t, testLinkDown) }

func testLinkDown(t *testing.T, pg page) {
	mock := &coinbasetest.Mock{}
	mock.Start(t)
	px := venuetest.NewProxy(t, strings.TrimPrefix(mock.Server().URL, "ws://"))
	cb, _ := venues.Lookup("coinbase")
	d := daemontest.Start(t, fmt.Sprintf("venues:\n  coinbase:\n    ws_url: ws://%s\n    symbols: [%s]\n", px.Addr, mock.Symbol()),
		daemon.Options{Venues: []venues.Venue{cb}})
	pg.navigate(t, d.URL("http")+"/?stream="+url.QueryEscape("coinbase:level2:"+mock.Symbol()))
	link := func() string {
		var s string
		pg.eval(t, `(r => r ? r.dataset.link : '')(document.querySelector('#venue-table tr[data-venue="coinbase"]'))`, &s)
		return s
	}
	waitFor(t, 10*time.Second, "the page never showed coinbase up", func() bool { return link() == "up" })
	pg.screenshot(t, "link-up")
	px.Kill()
	took := waitFor(t, 2*time.Second, "the page did not show the link down within 2 s", func() bool { s := link(); return s == "down" || s == "connecting" })
	t.Logf("link %s shown %v after the venue went away", link(), took)
	var notices string
	waitFor(t, 2*time.Second, "no link_down notice in the stream view", func() bool {
		pg.eval(t, `[...document.querySelectorAll('#notices li')].map(l => l.dataset.kind).join(' ')`, &notices)
		return strings.Contains(notices, "link_down")
	})
	pg.screenshot(t, "link-down")
	// Down since the first failure, with the reason: the text does not
	// restart at each reconnect attempt.
	var row struct{ Error, Since string }
	waitFor(t, 10*time.Second, "the venue table shows why coinbase is down", func() bool {
		pg.eval(t, `(r => r ? {Error: (r.querySelector('.link-error') || {}).textContent || '', Since: r.cells[2].title} : {})(document.querySelector('#venue-table tr[data-venue="coinbase"]'))`, &row)
		return row.Error != ""
	})
	first := row.Since
	waitFor(t, 10*time.Second, "more reconnect attempts", func() bool {
		var cov []venue.Coverage
		getJSON(t, d.URL("http")+"/v1/coverage", &cov)
		return len(cov) == 1 && !cov[0].DownSince.IsZero() && time.Since(cov[0].DownSince) > 2*time.Second
	})
	pg.eval(t, `document.querySelector('#venue-table tr[data-venue="coinbase"]').cells[2].title`, &row.Since)
	if row.Since != first {
		t.Errorf("down since %s, then %s: it restarted at a reconnect attempt", first, row.Since)
	}
}
