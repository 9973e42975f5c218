package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/replay/replaytest"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

// historyConfig is a configuration whose claim check is the S3 server s,
// with two tokens (all, and okx-only) and history.max_range maxRange.
func historyConfig(t testing.TB, s *claimchecktest.S3Server, maxRange string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`
tokens:
  - {name: all, token: all-secret}
  - {name: okx-only, token: okx-secret, venues: [okx]}
history:
  max_range: %s
claim_check:
  stores:
    - {kind: s3, endpoint: %q, region: us-east-1, bucket: %s, path_style: true, access_key_id: %s, secret_access_key: %s}
venues:
  kraken:
    ws_url: ws://127.0.0.1:1/
    symbols: []
`, maxRange, s.Endpoint, s.Bucket, s.AccessKey, s.SecretKey))
}

func authGet(t testing.TB, u, token string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// importCaptures runs fanoutd history import.
func importCaptures(t testing.TB, cfgPath string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"history", "import", "--config", cfgPath}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("history import: exit %d: %s", code, stderr.String())
	}
	return stdout.String()
}

// exportLines runs replay --export --streams of captures and returns its
// lines.
func exportLines(t *testing.T, cfgPath, streams string, captures ...string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "export.jsonl")
	var stdout, stderr bytes.Buffer
	args := append([]string{"replay", "--config", cfgPath, "--export", out, "--streams", streams}, captures...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("replay --export: exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return splitLines(b)
}

// asHistory renames a capture in export lines as a history answer names
// the capture it plays: history:<venue>:c<connection>.
func asHistory(lines []string, capture, name string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.ReplaceAll(l, `"capture":"`+capture+`"`, `"capture":"`+name+`"`)
	}
	return out
}

func splitLines(b []byte) []string {
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineTime is an export line's time: an event's recv_time, a notice's at.
func lineTime(t *testing.T, l string) time.Time {
	t.Helper()
	var v struct {
		RecvTime time.Time `json:"recv_time"`
		At       time.Time `json:"at"`
	}
	if err := json.Unmarshal([]byte(l), &v); err != nil {
		t.Fatalf("%v: %s", err, l)
	}
	if !v.RecvTime.IsZero() {
		return v.RecvTime
	}
	return v.At
}

// cut keeps the lines within [from, to).
func cut(t *testing.T, lines []string, from, to time.Time) []string {
	var out []string
	for _, l := range lines {
		if at := lineTime(t, l); !at.Before(from) && at.Before(to) {
			out = append(out, l)
		}
	}
	return out
}

type historyRange struct {
	Venue, Symbol string
	From, To      time.Time
	Segments      int
}

func listHistory(t testing.TB, addr, token string) []historyRange {
	t.Helper()
	code, _, b := authGet(t, "http://"+addr+"/v1/history", token)
	if code != 200 {
		t.Fatalf("GET /v1/history: %d %s", code, b)
	}
	var v struct{ Ranges []historyRange }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Ranges
}

func streamURL(addr, streams string, from, to time.Time) string {
	return fmt.Sprintf("http://%s/v1/history/stream?streams=%s&from=%s&to=%s", addr, url.QueryEscape(streams),
		url.QueryEscape(from.Format(time.RFC3339Nano)), url.QueryEscape(to.Format(time.RFC3339Nano)))
}

func assertSameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: line %d:\ngot  %s\nwant %s", what, i, got[i], want[i])
		}
	}
}

// bookAtReplay plays capture through its venue's own decoder and returns
// the book of st after the last event received at or before at, with the
// count of st's events up to then (its seq in an export).
func bookAtReplay(t *testing.T, capture, venueName string, st venue.Stream, at time.Time) (*venue.Book, uint64) {
	t.Helper()
	reg, _ := venues.Lookup(venueName)
	var mu sync.Mutex
	book := &venue.Book{}
	var seq uint64
	sink := sinkFunc(func(ev *venue.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Stream != st || ev.RecvTime.After(at) {
			return
		}
		seq++
		if ev.Kind == venue.KindBook {
			book.Apply(ev)
		}
	})
	_, err := replay.Play(context.Background(), replay.PlayerOptions{
		NewDecoder: func(_ string, s venue.Sink) (venue.Decoder, error) {
			return reg.NewDecoder(venue.Config{Symbols: nil, Sink: s}), nil
		},
		Sink: func(string) (venue.Sink, error) { return sink, nil },
	}, []replay.Source{replay.FileSource(capture, "")})
	if err != nil {
		t.Fatal(err)
	}
	return book, seq
}

type sinkFunc func(*venue.Event)

func (f sinkFunc) Event(ev *venue.Event) { f(ev) }
func (sinkFunc) Notice(notice.Notice)    {}
func levelStrings(ls []venue.Level) [][2]string {
	out := make([][2]string, len(ls))
	for i, l := range ls {
		out[i] = [2]string{l.Price.String(), l.Size.String()}
	}
	return out
}

// TestHistoryFromS3: captures checked in with history import to a real S3
// server (versitygw) are listed by GET /v1/history on a daemon started on
// the same bucket; a range of them from /v1/history/stream is replay
// --export of the same captures cut to the range; ?at= books are the
// books a replay held at that instant; bad requests get their errors.
func TestHistoryFromS3(t *testing.T) {
	s3 := claimchecktest.VersityGW(t)
	cfgPath := historyConfig(t, s3, "1h")
	coinbaseCap := filepath.Join("..", "..", "testdata", "replay", "coinbase.jsonl.gz")
	okxCap := filepath.Join("..", "..", "testdata", "replay", "okx.jsonl.gz")
	out := importCaptures(t, cfgPath, coinbaseCap, okxCap)
	if !strings.Contains(out, "coinbase connection 0") || !strings.Contains(out, "okx connection 0") {
		t.Fatalf("import said:\n%s", out)
	}
	ld := startLiveDaemon(t, cfgPath, daemon.Options{})

	ranges := listHistory(t, ld.addr, "all-secret")
	var cb *historyRange
	venuesSeen := map[string]bool{}
	for i, r := range ranges {
		venuesSeen[r.Venue] = true
		if r.Venue == "coinbase" && cb == nil {
			cb = &ranges[i]
		}
	}
	if !venuesSeen["coinbase"] || !venuesSeen["okx"] || len(venuesSeen) != 2 || cb == nil || cb.Segments != 1 || !cb.From.Before(cb.To) {
		t.Fatalf("history: %+v", ranges)
	}
	for _, r := range listHistory(t, ld.addr, "okx-secret") {
		if r.Venue != "okx" {
			t.Fatalf("okx-only token sees %+v", r)
		}
	}

	// A range in the middle of the capture.
	span := cb.To.Sub(cb.From)
	from, to := cb.From.Add(span/3), cb.From.Add(2*span/3)
	want := cut(t, asHistory(exportLines(t, cfgPath, "coinbase:*:*", coinbaseCap), coinbaseCap, "history:coinbase:c0"), from, to)
	if len(want) < 50 {
		t.Fatalf("only %d lines in the range", len(want))
	}
	code, h, b := authGet(t, streamURL(ld.addr, "coinbase:*:*", from, to), "all-secret")
	if code != 200 || h.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %d %v %s", code, h, b)
	}
	assertSameLines(t, "range", splitLines(b), want)

	// The websocket form: the same lines in the live protocol's framing,
	// as fast as it goes or at the recorded pace.
	for _, speed := range []string{"max", "1", "4"} {
		u := "ws" + strings.TrimPrefix(streamURL(ld.addr, "coinbase:*:*", from, to), "http") + "&speed=" + speed
		assertSameLines(t, "websocket at speed "+speed, wsHistoryLines(t, u, "all-secret"), want)
	}
	if code, _, b := authGet(t, streamURL(ld.addr, "coinbase:*:*", from, to)+"&speed=fast", "all-secret"); code != 400 || !strings.Contains(string(b), `"code":"invalid_query"`) {
		t.Errorf("speed=fast: %d %s", code, b)
	}

	// The whole capture, as one name.
	sym := ""
	for _, r := range ranges {
		if r.Venue == "coinbase" {
			sym = r.Symbol
			break
		}
	}
	l2 := "coinbase:level2:" + sym
	wantAll := asHistory(exportLines(t, cfgPath, l2, coinbaseCap), coinbaseCap, "history:coinbase:c0")
	_, _, b = authGet(t, streamURL(ld.addr, l2, cb.From, cb.To.Add(time.Nanosecond)), "all-secret")
	assertSameLines(t, "whole capture", splitLines(b), cut(t, wantAll, cb.From, cb.To.Add(time.Nanosecond)))

	// Books at instants.
	for _, frac := range []int{2, 3, 5} {
		at := cb.From.Add(span * time.Duration(frac-1) / time.Duration(frac))
		wb, wseq := bookAtReplay(t, coinbaseCap, "coinbase", venue.Stream(l2), at)
		code, _, b := authGet(t, fmt.Sprintf("http://%s/v1/books/coinbase/%s?at=%s", ld.addr, sym, url.QueryEscape(at.Format(time.RFC3339Nano))), "all-secret")
		if code != 200 {
			t.Fatalf("book at %s: %d %s", at, code, b)
		}
		var v struct {
			Stream     string
			Seq        uint64
			RecvTime   time.Time `json:"recv_time"`
			Bids, Asks [][2]string
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		wantBids, wantAsks := levelStrings(wb.Top(nil, venue.Bid, 0)), levelStrings(wb.Top(nil, venue.Ask, 0))
		if len(wantBids) == 0 || len(wantAsks) == 0 {
			t.Fatalf("the replay held no book at %s", at)
		}
		if v.Seq != wseq || v.RecvTime.After(at) || fmt.Sprint(v.Bids) != fmt.Sprint(wantBids) || fmt.Sprint(v.Asks) != fmt.Sprint(wantAsks) {
			t.Fatalf("book at %s: seq %d (want %d), recv %s, %d/%d levels (want %d/%d)", at, v.Seq, wseq, v.RecvTime, len(v.Bids), len(v.Asks), len(wantBids), len(wantAsks))
		}
		code, _, b = authGet(t, fmt.Sprintf("http://%s/v1/books/coinbase/%s?at=%s&depth=3", ld.addr, sym, url.QueryEscape(at.Format(time.RFC3339Nano))), "all-secret")
		if err := json.Unmarshal(b, &v); err != nil || code != 200 || len(v.Bids) != min(3, len(wantBids)) {
			t.Fatalf("book at depth 3: %d %s", code, b)
		}
	}

	// The error vocabulary.
	for _, tc := range []struct {
		name, u, token string
		status         int
		code           string
	}{
		{"from after to", streamURL(ld.addr, l2, to, from), "all-secret", 400, "invalid_query"},
		{"past max_range", streamURL(ld.addr, l2, from, from.Add(2*time.Hour)), "all-secret", 400, "range_too_long"},
		{"unknown venue", streamURL(ld.addr, "kraken:level2:XBT/USD", from, to), "all-secret", 404, "unknown_stream"},
		{"unknown symbol", streamURL(ld.addr, "coinbase:level2:NOPE-USD", from, to), "all-secret", 404, "unknown_symbol"},
		{"outside scopes", streamURL(ld.addr, l2, from, to), "okx-secret", 403, "unauthorized"},
		{"pattern outside scopes", streamURL(ld.addr, "*:trades:*", from, to), "okx-secret", 403, "unauthorized"},
		{"no token", streamURL(ld.addr, l2, from, to), "", 401, "unauthenticated"},
		{"bad time", "http://" + ld.addr + "/v1/history/stream?streams=" + l2 + "&from=yesterday&to=today", "all-secret", 400, "invalid_query"},
		{"bad stream", streamURL(ld.addr, "coinbase", from, to), "all-secret", 400, "invalid_stream"},
		{"book unknown symbol", "http://" + ld.addr + "/v1/books/coinbase/NOPE-USD?at=" + url.QueryEscape(from.Format(time.RFC3339)), "all-secret", 404, "unknown_symbol"},
		{"book before the capture", "http://" + ld.addr + "/v1/books/coinbase/" + sym + "?at=" + url.QueryEscape(cb.From.Add(-time.Hour).Format(time.RFC3339)), "all-secret", 404, "no_book"},
	} {
		code, _, b := authGet(t, tc.u, tc.token)
		if code != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, b, tc.status, tc.code)
		}
	}
	// A range with nothing recorded is an empty answer that says so.
	code, h, b = authGet(t, streamURL(ld.addr, l2, cb.From.Add(-time.Hour), cb.From.Add(-time.Minute)), "all-secret")
	if code != 200 || len(b) != 0 || h.Get(daemon.HistoryHeader) != "empty" {
		t.Fatalf("empty range: %d %v %q", code, h, b)
	}
	u := "ws" + strings.TrimPrefix(streamURL(ld.addr, l2, cb.From.Add(-time.Hour), cb.From.Add(-time.Minute)), "http")
	if lines := wsHistoryLines(t, u, "all-secret"); len(lines) != 0 {
		t.Fatalf("websocket of an empty range: %q", lines)
	}
}

// TestHistoryRecordedConnectionsFromS3: serve records Coinbase over two
// connections and checks each segment in to a real S3 server (versitygw,
// behind a proxy that counts and throttles). A second daemon on the same
// bucket then answers: the whole range is replay --export of the
// segments together (the connections merged in receive-time order); the
// book at the last instant is the venue's; and 200 concurrent queries
// over the range against a throttling store all succeed, with the same
// answer, reading each segment's pack from the store once.
func TestHistoryRecordedConnectionsFromS3(t *testing.T) {
	s3 := claimchecktest.VersityGW(t)
	proxy := claimchecktest.NewFaultProxy(t, s3.Endpoint)
	m := &coinbasetest.Mock{}
	syms := m.Serve(20)
	m.Start(t)
	dir := t.TempDir()
	via := s3.At(proxy.URL)
	recPath := writeConfig(t, fmt.Sprintf(`
record:
  enabled: true
  dir: %s
  check_in: true
claim_check:
  stores:
    - {kind: s3, endpoint: %q, region: us-east-1, bucket: %s, path_style: true, access_key_id: %s, secret_access_key: %s}
venues:
  coinbase:
    ws_url: %s
    symbols: [%s]
    channels: [level2]
`, dir, via.Endpoint, via.Bucket, via.AccessKey, via.SecretKey, m.Server().URL, strings.Join(syms, ", ")))
	var mu sync.Mutex
	var segs []replay.Segment
	rec := startLiveDaemon(t, recPath, daemon.Options{
		OnCheckIn: func(s replay.Segment, _ claimcheck.Claim) { mu.Lock(); segs = append(segs, s); mu.Unlock() },
	})
	trueBook := func(s string) *venue.Book {
		if s == coinbasetest.Symbol {
			return m.Book()
		}
		return m.ProductBook(s)
	}
	feed := rec.d.Hub().Feed("coinbase")
	// A live subscriber of every stream, holding each book as it goes.
	live := newLiveBooks()
	sub := dialLines(t, "ws://"+rec.addr+"/v1/stream")
	var names []string
	for _, s := range syms {
		names = append(names, `"coinbase:level2:`+s+`"`)
	}
	sub.send(t, `{"op":"subscribe","id":"1","streams":[`+strings.Join(names, ",")+`]}`)
	sub.until(t, 20*time.Second, func(l string) bool { live.line(t, l); return live.snapshots == len(syms) })
	m.Step(20)
	m.StepProducts(5, syms[1:]...)
	sub.until(t, 20*time.Second, func(l string) bool {
		live.line(t, l)
		for _, s := range syms {
			st := venue.NewStream("coinbase", venue.Level2, s)
			want := trueBook(s).Snapshot(st)
			b := live.books[st]
			if b == nil || levelsOf(b.Top(nil, venue.Bid, 0)) != levelsOf(want.Bids) || levelsOf(b.Top(nil, venue.Ask, 0)) != levelsOf(want.Asks) {
				return false
			}
		}
		return true
	})
	checkFor(t, 20*time.Second, "every book of the daemon to match the venue's", func() bool {
		for _, s := range syms {
			st := venue.NewStream("coinbase", venue.Level2, s)
			ev, ok := feed.Book(st)
			want := trueBook(s).Snapshot(st)
			if !ok || levelsOf(ev.Bids) != levelsOf(want.Bids) || levelsOf(ev.Asks) != levelsOf(want.Asks) {
				return false
			}
		}
		return true
	})
	rec.stop(t)
	mu.Lock()
	slices.SortFunc(segs, func(a, b replay.Segment) int { return a.Conn - b.Conn })
	mu.Unlock()
	if len(segs) != 2 || segs[0].Conn != 0 || segs[1].Conn != 1 {
		t.Fatalf("segments checked in: %+v", segs)
	}

	qPath := historyConfig(t, via, "24h")
	ld := startLiveDaemon(t, qPath, daemon.Options{})
	ranges := listHistory(t, ld.addr, "all-secret")
	if len(ranges) != len(syms) {
		t.Fatalf("%d ranges, want %d: %+v", len(ranges), len(syms), ranges)
	}
	from, to := ranges[0].From, ranges[0].To
	for _, r := range ranges {
		from, to = minTime(from, r.From), maxTime(to, r.To)
	}
	to = to.Add(time.Nanosecond)
	want := exportLines(t, qPath, "coinbase:level2:*", segs[0].Path, segs[1].Path)
	want = asHistory(asHistory(want, segs[0].Path, "history:coinbase:c0"), segs[1].Path, "history:coinbase:c1")
	u := streamURL(ld.addr, "coinbase:level2:*", from, to)
	code, h, b := authGet(t, u, "all-secret")
	if code != 200 || h.Get(daemon.HistoryHeader) != "segments=2" {
		t.Fatalf("stream: %d %v", code, h)
	}
	assertSameLines(t, "two connections", splitLines(b), want)
	whole := b

	// The book at the last event (the recording's end is a link drop,
	// after which no book is valid).
	lastEvent := map[string]time.Time{}
	for _, l := range want {
		if strings.HasPrefix(l, `{"type":"book"`) {
			var ev struct{ Stream string }
			json.Unmarshal([]byte(l), &ev)
			lastEvent[ev.Stream] = maxTime(lastEvent[ev.Stream], lineTime(t, l))
		}
	}
	for _, s := range syms {
		at := lastEvent["coinbase:level2:"+s]
		code, _, b := authGet(t, fmt.Sprintf("http://%s/v1/books/coinbase/%s?at=%s", ld.addr, s, url.QueryEscape(at.Format(time.RFC3339Nano))), "all-secret")
		var v struct{ Bids, Asks [][2]string }
		if code != 200 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("book of %s at the end: %d %s", s, code, b)
		}
		tb := trueBook(s).Snapshot(venue.NewStream("coinbase", venue.Level2, s))
		if len(v.Bids) == 0 || fmt.Sprint(v.Bids) != fmt.Sprint(levelStrings(tb.Bids)) || fmt.Sprint(v.Asks) != fmt.Sprint(levelStrings(tb.Asks)) {
			t.Fatalf("book of %s at the end differs from the venue's", s)
		}
	}

	// Books at instants while the subscriber was live: the book it held
	// after its last event received by then (a capture keeps receive times
	// to 100 ns).
	checked := 0
	for st, states := range live.states {
		for _, k := range []int{1, len(states) / 3, len(states) / 2, len(states) - 1} {
			at := states[k].at.Truncate(100 * time.Nanosecond)
			for k+1 < len(states) && !states[k+1].at.Truncate(100*time.Nanosecond).After(at) {
				k++ // events received at the same instant: the book after the last
			}
			code, _, b := authGet(t, fmt.Sprintf("http://%s/v1/books/coinbase/%s?at=%s", ld.addr, st.Symbol(), url.QueryEscape(at.Format(time.RFC3339Nano))), "all-secret")
			var v struct {
				Bids, Asks [][2]string
				RecvTime   time.Time `json:"recv_time"`
			}
			if code != 200 || json.Unmarshal(b, &v) != nil {
				t.Fatalf("book of %s at %s: %d %s", st, at, code, b)
			}
			if fmt.Sprint(v.Bids) != states[k].bids || fmt.Sprint(v.Asks) != states[k].asks || !v.RecvTime.Equal(at) {
				t.Fatalf("book of %s at %s (recv %s) differs from the live subscriber's:\nhistory %v %v\nlive    %s %s", st, at, v.RecvTime, v.Bids, v.Asks, states[k].bids, states[k].asks)
			}
			checked++
		}
	}
	t.Logf("%d books at an instant equal the live subscriber's", checked)

	// A fresh daemon (an empty cache), a throttling store, 200 queries.
	ld.stop(t)
	ld = startLiveDaemon(t, qPath, daemon.Options{})
	listHistory(t, ld.addr, "all-secret")
	u = streamURL(ld.addr, "coinbase:level2:*", from, to)
	proxy.Reset()
	proxy.Throttle(20, 2)
	const n = 200
	start := time.Now()
	var wg sync.WaitGroup
	answers := make([][]byte, n)
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", u, nil)
			req.Header.Set("Authorization", "Bearer all-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			codes[i] = resp.StatusCode
			answers[i], _ = io.ReadAll(resp.Body)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i := range n {
		if codes[i] != 200 || !bytes.Equal(answers[i], whole) {
			t.Fatalf("query %d: %d, %d bytes (want %d): %.200s", i, codes[i], len(answers[i]), len(whole), answers[i])
		}
	}
	passed := map[string]int{}
	for _, r := range proxy.Requests() {
		if r.Method == "GET" && strings.HasSuffix(r.Path, ".zip") && (r.Status == 200 || r.Status == 206) {
			passed[r.Path]++
		}
	}
	if len(passed) != 2 {
		t.Fatalf("GETs answered per pack: %v", passed)
	}
	for p, c := range passed {
		// One ranged read of the pack's index, one of the segment's bytes.
		if c != 2 {
			t.Errorf("%s: %d GETs answered, want 2 (index and bytes) for %d queries", p, c, n)
		}
	}
	gets := proxy.Count("GET", ".zip", "*")
	t.Logf("%d queries in %v; store GETs answered per pack: %v; GETs of the packs %d (throttled %d): goodput %.0f%%",
		n, elapsed.Round(time.Millisecond), passed, gets, gets-4, 400/float64(gets))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestTardisMachineRoutes: tardis-machine's /replay gives the recorded
// frames of the range in its {"localTimestamp","message"} framing, and
// /replay-normalized gives one tardis message per event the export
// writes of the same range (trade per trade, book_change per book event,
// book_snapshot per derived snapshot), prices and amounts as the exact
// decimals.
func TestTardisMachineRoutes(t *testing.T) {
	s3 := claimchecktest.VersityGW(t)
	cfgPath := historyConfig(t, s3, "24h")
	capture := filepath.Join("..", "..", "testdata", "replay", "binance.jsonl.gz")
	importCaptures(t, cfgPath, capture)
	ld := startLiveDaemon(t, cfgPath, daemon.Options{})
	rg := listHistory(t, ld.addr, "all-secret")[0]
	span := rg.To.Sub(rg.From)
	from, to := rg.From.Add(span/4), rg.From.Add(3*span/4)
	opts := func(o map[string]any) string {
		if o["from"] == nil {
			o["from"], o["to"] = from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)
		}
		b, _ := json.Marshal(o)
		return url.QueryEscape(string(b))
	}

	// Raw: every capture line in the range, in order.
	f, err := replay.Open(capture)
	if err != nil {
		t.Fatal(err)
	}
	var wantRaw []string
	var last time.Time
	for {
		rec, err := f.Next()
		if err != nil {
			break
		}
		if rec.Time.IsZero() {
			rec.Time = last // a bare disconnect line: at the line before's time
		}
		last = rec.Time
		if rec.Time.Before(from) || !rec.Time.Before(to) {
			continue
		}
		if rec.Disconnect {
			wantRaw = append(wantRaw, "") // tardis-machine's disconnect: an empty line
			continue
		}
		wantRaw = append(wantRaw, `{"localTimestamp":"`+string(replay.AppendTime(nil, rec.Time))+`","message":`+string(rec.Frame)+`}`)
	}
	f.Close()
	code, _, b := authGet(t, "http://"+ld.addr+"/replay?options="+opts(map[string]any{"exchange": "binance"}), "all-secret")
	if code != 200 {
		t.Fatalf("/replay: %d %s", code, b)
	}
	assertSameLines(t, "/replay", splitLines(b), wantRaw)

	// Normalized, against the export of the same range.
	sym := rg.Symbol
	exp := cut(t, exportLines(t, cfgPath, "binance:trades:"+sym+",binance:level2:"+sym+",binance:book_snapshot_10_100ms:"+sym, capture), from, to)
	count := map[string]int{}
	for _, l := range exp {
		switch {
		case strings.HasPrefix(l, `{"type":"trade"`):
			count["trade"]++
		case strings.HasPrefix(l, `{"type":"book","stream":"binance:level2:`):
			count["book_change"]++
		case strings.HasPrefix(l, `{"type":"book","stream":"binance:book_snapshot_10_100ms:`):
			count["book_snapshot"]++
		}
	}
	code, _, b = authGet(t, "http://"+ld.addr+"/replay-normalized?options="+opts(map[string]any{"exchange": "binance",
		"symbols": []string{strings.ToLower(sym)}, "dataTypes": []string{"trade", "book_change", "book_snapshot_10_100ms"}}), "all-secret")
	if code != 200 {
		t.Fatalf("/replay-normalized: %d %s", code, b)
	}
	got := map[string]int{}
	for _, l := range splitLines(b) {
		var m struct {
			Type, Symbol, Exchange, Name string
			Timestamp, LocalTimestamp    time.Time
			Bids                         []struct{ Price, Amount json.Number }
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if m.Symbol != strings.ToUpper(sym) || m.Exchange != "binance" || m.LocalTimestamp.Before(from) || !m.LocalTimestamp.Before(to) {
			t.Fatalf("message %s", l)
		}
		if m.Type == "book_snapshot" && (m.Name != "book_snapshot_10_100ms" || len(m.Bids) > 10) {
			t.Fatalf("snapshot %s", l)
		}
		got[m.Type]++
	}
	if got["book_change"] == 0 || got["book_snapshot"] == 0 || fmt.Sprint(got) != fmt.Sprint(count) {
		t.Fatalf("messages %v, export %v", got, count)
	}

	// The websocket form: the same messages, one a message, then a
	// normal close.
	normalized := splitLines(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wsURL := "ws://" + ld.addr + "/ws-replay-normalized?options=" + opts(map[string]any{"exchange": "binance",
		"symbols": []string{strings.ToLower(sym)}, "dataTypes": []string{"trade", "book_change", "book_snapshot_10_100ms"}})
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer all-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	var msgs []string
	for {
		_, m, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("ws: %v", err)
			}
			break
		}
		msgs = append(msgs, string(m))
	}
	assertSameLines(t, "/ws-replay-normalized", msgs, normalized)

	trade := []string{"trade"}
	for _, tc := range []struct {
		opts   string
		token  string
		status int
		code   string
	}{
		{opts(map[string]any{"exchange": "binance", "dataTypes": trade, "from": to, "to": from}), "all-secret", 400, "invalid_query"},
		{opts(map[string]any{"exchange": "binance", "dataTypes": trade, "from": from, "to": from.Add(25 * time.Hour)}), "all-secret", 400, "range_too_long"},
		{opts(map[string]any{"exchange": "binance", "dataTypes": trade}), "okx-secret", 403, "unauthorized"},
		{opts(map[string]any{"exchange": "binance", "dataTypes": trade}), "", 401, "unauthenticated"},
		{opts(map[string]any{"exchange": "ftx"}), "all-secret", 404, "unknown_stream"},
		{opts(map[string]any{"exchange": "okex", "dataTypes": trade}), "all-secret", 404, "unknown_stream"},
		{opts(map[string]any{"exchange": "binance", "symbols": []string{"ETHBTC"}, "dataTypes": trade}), "all-secret", 404, "unknown_symbol"},
		{opts(map[string]any{"exchange": "binance", "dataTypes": []string{"candles"}}), "all-secret", 400, "invalid_query"},
		{opts(map[string]any{"exchange": "binance"}), "all-secret", 400, "invalid_query"}, // normalized without dataTypes
	} {
		code, _, b := authGet(t, "http://"+ld.addr+"/replay-normalized?options="+tc.opts, tc.token)
		if code != tc.status || !strings.Contains(string(b), `"code":"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.opts, code, b, tc.status, tc.code)
		}
	}
	// A range with nothing recorded: an empty answer that says so, on
	// every route.
	empty := opts(map[string]any{"exchange": "binance", "dataTypes": trade, "from": rg.From.Add(-time.Hour), "to": rg.From.Add(-time.Minute)})
	for _, route := range []string{"/replay", "/replay-normalized"} {
		code, h, b := authGet(t, "http://"+ld.addr+route+"?options="+empty, "all-secret")
		if code != 200 || len(b) != 0 || h.Get(daemon.HistoryHeader) != "empty" {
			t.Errorf("%s of an empty range: %d %v %q", route, code, h, b)
		}
	}
}

// shiftedCopies writes n copies of capture into dir, each shifted to
// follow the one before: the consecutive segments of one venue connection.
func shiftedCopies(t testing.TB, capture, dir string, n int) []string {
	t.Helper()
	c := replaytest.ReadCapture(t, capture)
	var paths []string
	for k := range n {
		path := filepath.Join(dir, fmt.Sprintf("seg%d.jsonl.gz", k))
		c.WriteShifted(t, path, k, 1)
		paths = append(paths, path)
	}
	return paths
}

// TestHistoryStreamsBeforeTheRangeIsRead: a query over three segments of
// one connection, each checked in to a real S3 server (versitygw) as a
// pack of its own, answers its status, headers and the first segment's
// lines while the store does not answer for the other two; once it does,
// the answer is replay --export of the three segments.
func TestHistoryStreamsBeforeTheRangeIsRead(t *testing.T) {
	s3 := claimchecktest.VersityGW(t)
	proxy := claimchecktest.NewFaultProxy(t, s3.Endpoint)
	via := s3.At(proxy.URL)
	cfgPath := historyConfig(t, via, "24h")
	segs := shiftedCopies(t, filepath.Join("..", "..", "testdata", "replay", "coinbase.jsonl.gz"), t.TempDir(), 3)
	packs := map[string]bool{}
	var first string   // the pack of the first segment
	var later []string // the packs of the second and third segments
	for i, seg := range segs {
		importCaptures(t, cfgPath, seg)
		for _, r := range proxy.Requests() {
			if r.Method == "PUT" && strings.HasSuffix(r.Path, ".zip") && !packs[r.Path] {
				packs[r.Path] = true
				if i > 0 {
					later = append(later, r.Path)
				} else {
					first = r.Path
				}
			}
		}
	}
	if len(packs) != 3 || len(later) != 2 {
		t.Fatalf("packs %v", packs)
	}
	ld := startLiveDaemon(t, cfgPath, daemon.Options{})
	ranges := listHistory(t, ld.addr, "all-secret")
	l2 := "coinbase:level2:" + ranges[0].Symbol
	from, to := ranges[0].From, ranges[0].To.Add(time.Nanosecond)
	// The segments of one connection play as one capture: their
	// concatenation (gzip members one after the other).
	whole := filepath.Join(t.TempDir(), "whole.jsonl.gz")
	var all []byte
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := os.WriteFile(whole, all, 0o644); err != nil {
		t.Fatal(err)
	}
	want := asHistory(exportLines(t, cfgPath, l2, whole), whole, "history:coinbase:c0")

	proxy.HangPaths(later...)
	req, _ := http.NewRequest("GET", streamURL(ld.addr, l2, from, to), nil)
	req.Header.Set("Authorization", "Bearer all-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(daemon.HistoryHeader) != "segments=3" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	// The answer's first bytes left after one segment read: the only pack
	// the store has answered a GET of is the first segment's.
	if got := answeredPacks(proxy, packs); !slices.Equal(got, []string{first}) {
		t.Fatalf("packs read when the answer started: %v, want only the first segment's %s", got, first)
	}
	// The second segment's read waits on the store; the first segment's
	// lines are out.
	checkFor(t, 20*time.Second, "a read of a later segment to wait on the store", func() bool {
		for _, r := range proxy.Requests() {
			if r.Method == "GET" && r.Status == 0 && slices.Contains(later, r.Path) {
				return true
			}
		}
		return false
	})
	br := bufio.NewReader(resp.Body)
	var got []string
	for len(got) < 100 {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d lines: %v", len(got), err)
		}
		got = append(got, strings.TrimSuffix(l, "\n"))
	}
	if got := answeredPacks(proxy, packs); !slices.Equal(got, []string{first}) {
		t.Fatalf("packs read when 100 lines were out: %v, want only the first segment's %s", got, first)
	}
	proxy.Release()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, splitLines(rest)...)
	assertSameLines(t, "three segments", got, cut(t, want, from, to))
}

// answeredPacks are the packs (of packs) the store answered a GET of so
// far, sorted.
func answeredPacks(proxy *claimchecktest.FaultProxy, packs map[string]bool) []string {
	var out []string
	for _, r := range proxy.Requests() {
		if r.Method == "GET" && r.Status != 0 && packs[r.Path] && !slices.Contains(out, r.Path) {
			out = append(out, r.Path)
		}
	}
	slices.Sort(out)
	return out
}

// liveBooks is a live subscriber's books, and each book's state after each
// event, by receive time.
type liveBooks struct {
	books     map[venue.Stream]*venue.Book
	states    map[venue.Stream][]liveState
	snapshots int
}

type liveState struct {
	at         time.Time
	bids, asks string // fmt.Sprint of the [][2]string levels
}

func newLiveBooks() *liveBooks {
	return &liveBooks{books: map[venue.Stream]*venue.Book{}, states: map[venue.Stream][]liveState{}}
}

// line applies one line of the websocket.
func (lb *liveBooks) line(t *testing.T, l string) {
	t.Helper()
	if !strings.HasPrefix(l, `{"type":"book"`) {
		return
	}
	var m struct {
		Stream     venue.Stream
		Snapshot   bool
		Bids, Asks [][2]string
		RecvTime   time.Time `json:"recv_time"`
	}
	if err := json.Unmarshal([]byte(l), &m); err != nil {
		t.Fatalf("%v: %s", err, l)
	}
	levels := func(ls [][2]string) []venue.Level {
		out := make([]venue.Level, len(ls))
		for i, x := range ls {
			out[i] = venue.Level{Price: decimal.RequireFromString(x[0]), Size: decimal.RequireFromString(x[1])}
		}
		return out
	}
	b := lb.books[m.Stream]
	if b == nil {
		b = &venue.Book{}
		lb.books[m.Stream] = b
	}
	if m.Snapshot {
		lb.snapshots++
	}
	b.Apply(&venue.Event{Stream: m.Stream, Kind: venue.KindBook, Snapshot: m.Snapshot, Bids: levels(m.Bids), Asks: levels(m.Asks)})
	lb.states[m.Stream] = append(lb.states[m.Stream], liveState{at: m.RecvTime,
		bids: fmt.Sprint(levelStrings(b.Top(nil, venue.Bid, 0))), asks: fmt.Sprint(levelStrings(b.Top(nil, venue.Ask, 0)))})
}

// wsHistoryLines reads the websocket form of a history query until its
// normal close and returns its lines.
func wsHistoryLines(t *testing.T, u, token string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(-1)
	var lines []string
	for {
		_, m, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("%s: %v after %d lines", u, err, len(lines))
			}
			return lines
		}
		lines = append(lines, strings.Split(string(m), "\n")...)
	}
}
