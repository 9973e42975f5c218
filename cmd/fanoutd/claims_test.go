package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck"
	"github.com/fanoutd/fanoutd/internal/config"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/replay"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/coinbase"
)

// tempClaimStore points a configuration still on the embedded default
// claim store (./data/claims) at a temporary directory, so tests never
// write into the source tree.
func tempClaimStore(t *testing.T, cfg *config.Config) {
	t.Helper()
	st := cfg.ClaimCheck.Stores
	if len(st) == 1 && st[0].Kind == "dir" && st[0].Path == claimcheck.DefaultDirRoot {
		st[0].Path = t.TempDir()
	}
}

func TestClaimCheckConfig(t *testing.T) {
	cfg, err := config.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cc := cfg.ClaimCheck
	if cc.Tenant != "default" || cc.SnapshotIntervalMS != 60000 || cc.SnapshotClaimMinBytes != 65536 ||
		len(cc.Stores) != 1 || cc.Stores[0].Kind != "dir" || cc.Stores[0].Path != config.DefaultClaimDir || claimcheck.DefaultDirRoot != "./data/claims" {
		t.Fatalf("defaults %+v", cc)
	}
	cfg, err = config.Parse([]byte("claim_check:\n  snapshot_interval_ms: 250\n  stores:\n    - kind: dir\n      path: /tmp/x\n    - kind: s3\n      bucket: b\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cc := cfg.ClaimCheck; cc.SnapshotIntervalMS != 250 || cc.ReadMaxInflight != 64 || len(cc.Stores) != 2 || cc.Stores[1].Name != "s3" {
		t.Fatalf("%+v", cc)
	}
	for _, tc := range []struct{ yml, want string }{
		{"claim_check:\n  bogus: 1\n", "fanoutd: config: claim_check.bogus: unknown key"},
		{"claim_check:\n  read_max_inflight: 0\n", "fanoutd: config: claim_check.read_max_inflight: 0: must be at least 1"},
		{"claim_check:\n  read_deadline_ms: soon\n", "fanoutd: config: claim_check.read_deadline_ms:"},
		{"claim_check:\n  tenant: a/b\n", `fanoutd: config: claim_check.tenant: "a/b"`},
		{"claim_check:\n  stores: [{kind: s3}]\n", `fanoutd: config: claim_check.stores[0].bucket: ""`},
		{"claim_check:\n  stores: [{kind: tape}]\n", `fanoutd: config: claim_check.stores[0].kind: "tape"`},
		{"claim_check:\n  snapshot_claim_min_bytes: -1\n", "fanoutd: config: claim_check.snapshot_claim_min_bytes: -1 is negative"},
		{"tokens:\n  - name: a\n    token: x\n    tenants: [\"no way\"]\n", `fanoutd: config: tokens[0].tenants[0]: "no way"`},
	} {
		p := writeConfig(t, tc.yml)
		var out, errb bytes.Buffer
		if code := run([]string{"check-config", p}, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), tc.want) ||
			strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want prefix %q", tc.yml, code, errb.String(), tc.want)
		}
		errb.Reset()
		if code := run([]string{"serve", "--config", p}, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), tc.want) {
			t.Errorf("serve %q: exit %d, stderr %q", tc.yml, code, errb.String())
		}
	}
}

// get answers the status, headers and body of a GET.
func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
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

// latestSnapshot polls /v1/snapshots/coinbase/BTC-USD/latest until it
// answers a claim at seq minSeq or later, and returns its headers and
// bytes.
func latestSnapshot(t *testing.T, td *testDaemon, minSeq uint64) (http.Header, []byte) {
	t.Helper()
	var (
		h    http.Header
		body []byte
	)
	checkFor(t, 10*time.Second, "a snapshot claim at seq "+strconv.FormatUint(minSeq, 10), func() bool {
		var code int
		code, h, body = get(t, "http://"+td.addr+"/v1/snapshots/coinbase/BTC-USD/latest")
		seq, _ := strconv.ParseUint(h.Get("X-Claim-Seq"), 10, 64)
		return code == 200 && seq >= minSeq
	})
	return h, body
}

func TestSnapshotClaimsEndToEnd(t *testing.T) {
	store := t.TempDir()
	yml := `
claim_check:
  snapshot_interval_ms: 20
  pack_max_age_ms: 5
  snapshot_claim_min_bytes: 0
  stores: [{kind: dir, path: ` + store + `}]
venues:
  coinbase:
    symbols: [BTC-USD]
`
	td := startDaemon(t, yml)
	c := dial(t, td.url(""), dialOpts{})
	c.send(map[string]any{"op": "subscribe", "id": "s", "streams": []string{string(l2)}})
	if r := c.reply("s"); r.Type != "ack" {
		t.Fatalf("subscribe: %+v", r)
	}
	td.bookSnapshot() // seq 1
	h, body := latestSnapshot(t, td, 1)
	book, _ := td.d.Hub().Feed("coinbase").Book(l2)
	if want := book.AppendJSON(nil); !bytes.Equal(body, want) || h.Get("X-Claim-Seq") != "1" || h.Get("X-Claim-Stream") != string(l2) {
		t.Fatalf("latest: headers %v body %s, want %s", h, body, want)
	}
	url1 := h.Get("X-Claim-Url")
	if id := h.Get("X-Claim-Id"); id == "" || !strings.HasSuffix(url1, "/v1/claims/default/"+id) {
		t.Fatalf("claim id %q url %q", id, url1)
	}
	code, ch, cb := get(t, "http://"+td.addr+url1)
	if code != 200 || !bytes.Equal(cb, body) || ch.Get("ETag") == "" {
		t.Fatalf("GET %s: %d %v %s", url1, code, ch, cb)
	}

	// An adapter announces a resync before the new snapshot: the notice
	// carries the newest claim so far.
	resync := func() wire {
		td.src.Notice(notice.Must(notice.BookResync, "coinbase", string(l2), time.Now(), "resync", map[string]any{"reason": "gap"}))
		ws := c.until(func(w wire) bool { return w.Type == "notice" && w.Kind == "book_resync" })
		return ws[len(ws)-1]
	}
	if n := resync(); claimSeq(n.Details["claim"]) != 1 || n.Details["reason"] != "gap" {
		t.Fatalf("book_resync before the new snapshot: %+v", n.Details)
	}
	td.bookUpdate(0, 0) // seq 2
	td.bookSnapshot()   // seq 3: a resync, checked in at once
	h, body = latestSnapshot(t, td, 3)
	url3 := h.Get("X-Claim-Url")
	if url3 == url1 || h.Get("X-Claim-Seq") != "3" {
		t.Fatalf("after the resync: %v", h)
	}
	if code, _, cb := get(t, "http://"+td.addr+url3); code != 200 || !bytes.Equal(cb, body) {
		t.Fatalf("GET %s: %d", url3, code)
	}
	n := resync()
	if cl, _ := n.Details["claim"].(map[string]any); cl["url"] != url3 || cl["stream"] != string(l2) || claimSeq(cl) != 3 {
		t.Fatalf("book_resync after the new claim: %+v", n.Details)
	}

	// The snapshot op's ack carries the claim check (threshold 0), and
	// the inline book still comes.
	c.send(map[string]any{"op": "snapshot", "id": "snap", "stream": string(l2)})
	var ack *wire
	snapshot := false
	c.until(func(w wire) bool {
		if w.ID == "snap" {
			ack = &w
		}
		snapshot = snapshot || w.Snapshot
		return ack != nil && snapshot
	})
	if ack.Type != "ack" || ack.Claim["url"] != url3 || claimSeq(ack.Claim) != 3 || ack.Claim["stream"] != string(l2) {
		t.Fatalf("snapshot ack: %+v", *ack)
	}

	// The list, stats and metrics.
	code, _, lb := get(t, "http://"+td.addr+"/v1/snapshots/coinbase/BTC-USD")
	if code != 200 || !strings.Contains(string(lb), url1) || !strings.Contains(string(lb), url3) {
		t.Fatalf("list: %d %s", code, lb)
	}
	if code, _, sb := get(t, "http://"+td.addr+"/v1/claimcheck/stats"); code != 200 || !strings.Contains(string(sb), `"dir"`) {
		t.Fatalf("stats: %d %s", code, sb)
	}
	if _, _, mb := get(t, "http://"+td.addr+"/metrics"); !strings.Contains(string(mb), "fanoutd_claimcheck_reads_total") {
		t.Fatal("no claimcheck metrics on /metrics")
	}

	// claims get reads the same bytes straight from the store.
	cfgFile := writeConfig(t, yml)
	out := filepath.Join(t.TempDir(), "book.json")
	var so, se bytes.Buffer
	if code := run([]string{"claims", "get", url3, "--config", cfgFile, "-o", out}, &so, &se); code != 0 {
		t.Fatalf("claims get: exit %d: %s", code, se.String())
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, body) {
		t.Fatalf("claims get wrote %q, want %q", got, body)
	}
	so.Reset()
	if code := run([]string{"claims", "get", "--config", cfgFile, "http://example.com" + url1}, &so, &se); code != 0 || !bytes.Equal(so.Bytes(), cb) {
		t.Fatalf("claims get to stdout: exit %d: %s", code, se.String())
	}
	// A corrupted store object fails the sha256 check.
	corruptClaim(t, store, body)
	se.Reset()
	if code := run([]string{"claims", "get", url3, "--config", cfgFile, "-o", out + ".2"}, &so, &se); code != 1 || !strings.Contains(se.String(), "sha256 mismatch") {
		t.Fatalf("corrupted: exit %d: %s", code, se.String())
	}
	if _, err := os.Stat(out + ".2"); !os.IsNotExist(err) {
		t.Fatal("a corrupted claim was written")
	}
}

func claimSeq(v any) uint64 {
	m, _ := v.(map[string]any)
	f, _ := m["seq"].(float64)
	return uint64(f)
}

// corruptClaim flips a byte of data in every pack under dir holding it.
func corruptClaim(t *testing.T, dir string, data []byte) {
	t.Helper()
	n := 0
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if i := bytes.Index(b, data); i >= 0 {
			b[i+len(data)/2] ^= 0x20
			n++
			return os.WriteFile(p, b, 0o644)
		}
		return nil
	})
	if n == 0 {
		t.Fatal("no pack holds the claim")
	}
}

func TestClaimsGetErrors(t *testing.T) {
	p := writeConfig(t, "claim_check: {stores: [{kind: dir, path: "+t.TempDir()+"}]}\n")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"claims"}, 2, "usage: fanoutd claims get"},
		{[]string{"claims", "get"}, 2, "usage: fanoutd claims get"},
		{[]string{"claims", "get", "default/nope", "--config", p}, 2, "invalid claim reference"},
	} {
		var so, se bytes.Buffer
		if code := run(tc.args, &so, &se); code != tc.code || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, se.String())
		}
	}
	// A well-formed reference to a pack no store has.
	ref := writerWithClaim(t)
	p2 := writeConfig(t, "claim_check: {stores: [{kind: dir, path: "+t.TempDir()+"}]}\n")
	var so, se bytes.Buffer
	if code := run([]string{"claims", "get", ref, "--config", p2}, &so, &se); code != 1 || !strings.Contains(se.String(), "not found") {
		t.Fatalf("missing: exit %d, stderr %q", code, se.String())
	}
}

// writerWithClaim checks one snapshot in to a temporary dir store and
// returns the claim's reference.
func writerWithClaim(t *testing.T) string {
	t.Helper()
	cfg := claimcheck.Defaults()
	cfg.Stores[0].Path = t.TempDir()
	n, err := claimcheck.Open(context.Background(), cfg, claimcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	c, err := n.Writer.CheckIn(context.Background(), "", claimcheck.PackClaim{Kind: claimcheck.KindSnapshot, Stream: string(l2), Seq: 1, Time: t0, Data: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	return c.URL
}

// eventsOnly returns the event lines of an export.
func eventsOnly(b []byte) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.HasPrefix(l, `{"type":"notice"`) {
			out = append(out, l)
		}
	}
	return out
}

// TestCaptureClaimPlays checks capture segments in (a recorded gzip one
// as it is, a plain one with sidecar metadata gzipped) and plays each from
// its claim through replay.Play: the same events as the file.
func TestCaptureClaimPlays(t *testing.T) {
	cfg, err := config.Parse([]byte("claim_check: {stores: [{kind: dir, path: "+t.TempDir()+"}]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := claimcheck.Open(ctx, cfg.ClaimCheck.Config, claimcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)

	gz := filepath.Join("..", "..", "testdata", "replay", "coinbase.jsonl.gz")
	f, err := replay.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "seg.jsonl")
	var lines bytes.Buffer
	for range 200 {
		r, err := f.Next()
		if err != nil {
			break
		}
		if r.Disconnect {
			lines.WriteString("\n")
			continue
		}
		lines.Write(replay.AppendLine(nil, r.Time, r.Frame))
	}
	f.Close()
	os.WriteFile(plain, lines.Bytes(), 0o644)
	os.WriteFile(plain+".meta.json", []byte(`{"venue":"coinbase"}`), 0o644)

	play := func(src replay.Source) string {
		t.Helper()
		var out bytes.Buffer
		export := replay.NewExportSink(&out)
		_, err := replay.Play(ctx, replay.PlayerOptions{
			NewDecoder: func(v string, s venue.Sink) (venue.Decoder, error) {
				return coinbase.NewDecoder(venue.Config{Sink: s}), nil
			},
			Sink: func(string) (venue.Sink, error) { return export, nil },
		}, []replay.Source{src})
		if err != nil {
			t.Fatal(err)
		}
		export.Flush()
		return strings.Join(eventsOnly(out.Bytes()), "\n")
	}
	for _, path := range []string{gz, plain} {
		seg := replay.Segment{Venue: "coinbase", Path: path, Start: t0, End: t0.Add(time.Minute)}
		c, err := daemon.CheckIn(ctx, n.Writer, seg)
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind != claimcheck.KindCapture || c.ContentType != "application/gzip" {
			t.Fatalf("claim %+v", c)
		}
		src, err := daemon.ClaimSource(ctx, cfg.ClaimCheck, c.URL)
		if err != nil {
			t.Fatal(err)
		}
		want, got := play(replay.FileSource(path, "")), play(src)
		if got == "" || got != want {
			t.Fatalf("%s: claim played %d bytes of events, file %d", path, len(got), len(want))
		}
	}
	if _, err := daemon.ClaimSource(ctx, cfg.ClaimCheck, "default/nope"); err == nil || !strings.Contains(err.Error(), "replay: claim") {
		t.Fatalf("bad ref: %v", err)
	}
}

// TestResumedCarriesClaims: a stalled subscriber's resumed notice carries
// the claim check of the newest stored snapshot of each stream it lost.
func TestResumedCarriesClaims(t *testing.T) {
	td := startDaemon(t, `
websocket:
  send_buffer_bytes: 4096
claim_check:
  snapshot_interval_ms: 20
  pack_max_age_ms: 5
recovery:
  max_events_per_stream: 0 # the lost update would be sent again, not the book
venues:
  coinbase:
    symbols: [BTC-USD]
    max_queue_len: 50
    max_queue_bytes: 0
`)
	td.bookSnapshot()
	latestSnapshot(t, td, 1)
	stalled := dial(t, td.url(""), dialOpts{readBuf: 4096, paused: true})
	stalled.send(map[string]any{"op": "subscribe", "id": "s", "streams": []string{string(l2)}})
	checkFor(t, 5*time.Second, "subscribed", func() bool {
		for _, s := range td.d.Hub().Registry().All() {
			if s.NumStreams() == 1 {
				return true
			}
		}
		return false
	})
	feed := td.d.Hub().Feed("coinbase")
	i := 0
	for feed.Counters().Dropping.Load() == 0 {
		if i > 100000 {
			t.Fatal("stalled client never dropped")
		}
		td.bookUpdate(i, 20)
		i++
	}
	stalled.start()
	sub := td.d.Hub().Registry().All()[0]
	checkFor(t, 20*time.Second, "the stalled client to drain", func() bool {
		c := sub.Resolve()
		return c != nil && c.Len() == 0
	})
	td.bookUpdate(i, 0) // resumes it
	ws := stalled.until(func(w wire) bool { return w.Type == "notice" && w.Kind == "resumed" })
	res := ws[len(ws)-1]
	claims, _ := res.Details["claims"].(map[string]any)
	cl, _ := claims[string(l2)].(map[string]any)
	latest, ok := td.d.LatestClaim(l2)
	if !ok || cl["url"] == nil || cl["stream"] != string(l2) || claimSeq(cl) < 1 {
		t.Fatalf("resumed details %+v", res.Details)
	}
	if claimSeq(cl) > latest.Seq {
		t.Fatalf("resumed claim seq %d past the newest claim %d", claimSeq(cl), latest.Seq)
	}
	if code, _, _ := get(t, "http://"+td.addr+cl["url"].(string)); code != 200 {
		t.Fatalf("GET %s: %d", cl["url"], code)
	}
}

// TestClaimRoutesAuth: the claim routes take the daemon's tokens — 401
// without one, 403 outside its tenants (claims) or its streams
// (snapshots).
func TestClaimRoutesAuth(t *testing.T) {
	td := startDaemon(t, `
claim_check:
  snapshot_interval_ms: 20
  pack_max_age_ms: 5
tokens:
  - {name: all, token: all-secret}
  - {name: other-tenant, token: other-secret, tenants: [desk-b]}
  - {name: kraken-only, token: kraken-secret, venues: [kraken]}
  - {name: scoped, token: scoped-secret, tenants: [default], streams: ["coinbase:level2:*"]}
venues:
  coinbase:
    symbols: [BTC-USD]
`)
	td.bookSnapshot()
	bearer := func(s string) http.Header { return http.Header{"Authorization": {"Bearer " + s}} }
	var url string
	checkFor(t, 10*time.Second, "a snapshot claim", func() bool {
		c, ok := td.d.LatestClaim(l2)
		url = c.URL
		return ok
	})
	base := "http://" + td.addr
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{url, "", 401},
		{url, "wrong", 401},
		{url, "all-secret", 200},
		{url, "scoped-secret", 200},
		{url, "other-secret", 403},
		{url, "kraken-secret", 403}, // a Coinbase book outside a kraken-only token
		{"/v1/snapshots/coinbase/BTC-USD/latest", "", 401},
		{"/v1/snapshots/coinbase/BTC-USD/latest", "kraken-secret", 403},
		{"/v1/snapshots/coinbase/BTC-USD/latest", "other-secret", 403},
		{"/v1/snapshots/coinbase/BTC-USD/latest", "scoped-secret", 200},
		{"/v1/snapshots/coinbase/BTC-USD", "kraken-secret", 403},
		{"/v1/snapshots/coinbase/BTC-USD", "all-secret", 200},
		{"/v1/claimcheck/stats", "", 401},
		{"/v1/claimcheck/stats", "all-secret", 200},
	} {
		var h http.Header
		if tc.token != "" {
			h = bearer(tc.token)
		}
		if code, body := httpGet(t, base+tc.path, h); code != tc.want {
			t.Errorf("GET %s with %q: %d %s, want %d", tc.path, tc.token, code, body, tc.want)
		}
	}
}

// TestReplayCommandTakesClaimRef: `fanoutd replay --export` given a claim
// reference plays the checked-in capture exactly as the file it came from.
func TestReplayCommandTakesClaimRef(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fanoutd.yaml")
	os.WriteFile(cfgPath, []byte("claim_check: {stores: [{kind: dir, path: "+filepath.Join(dir, "claims")+"}]}\n"), 0o644)
	cfg, err := config.Load(cfgPath, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := claimcheck.Open(ctx, cfg.ClaimCheck.Config, claimcheck.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gz := filepath.Join("..", "..", "testdata", "replay", "bybit.jsonl.gz")
	c, err := daemon.CheckIn(ctx, n.Writer, replay.Segment{Venue: "bybit", Path: gz, Start: t0, End: t0.Add(time.Minute)})
	n.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	export := func(capture string) string {
		t.Helper()
		out := filepath.Join(dir, "out.jsonl")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"replay", "--export", out, "--config", cfgPath, capture}, &stdout, &stderr); code != 0 {
			t.Fatalf("replay %s: exit %d: %s", capture, code, stderr.String())
		}
		b, _ := os.ReadFile(out)
		return strings.Join(eventsOnly(b), "\n")
	}
	want := export(gz)
	for _, ref := range []string{"claim:" + c.Tenant + "/" + c.ID, c.URL} {
		if got := export(ref); got == "" || got != want {
			t.Fatalf("replay %s: %d bytes of events, the file gives %d", ref, len(got), len(want))
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"replay", "--export", "-", "--config", cfgPath, "claim:" + c.Tenant + "/nope"}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Fatalf("a missing claim: exit %d (%s)", code, stderr.String())
	}
}
