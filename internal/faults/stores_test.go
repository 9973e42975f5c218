package faults_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// TestStoreFaults runs a daemon whose claim store is S3 (gofakes3) behind
// a FaultProxy, with the reader's cache off so every claim read reaches
// the store, and injects each fault while a level2 book is published and
// checked in every 200 ms. Promise checked, for each fault: a claim read
// answers as docs/protocol.md's error table says (status, code, Retry-After);
// the daemon stays alive (/healthz, and events keep reaching a
// subscriber); once the fault is gone, reads answer 200 again and snapshot
// check-in resumes (a newer snapshot claim is announced).
func TestStoreFaults(t *testing.T) {
	s3 := claimchecktest.FakeS3(t)
	p := claimchecktest.NewFaultProxy(t, s3.Endpoint)
	yml := fmt.Sprintf(`venues:
  coinbase:
    symbols: [BTC-USD]
    channels: [level2]
claim_check:
  snapshot_interval_ms: 200
  pack_max_age_ms: 100
  cache_bytes: 0
  read_deadline_ms: 1500
  store_first_byte_timeout_ms: 500
  stores:
    - kind: s3
      bucket: %s
      endpoint: %s
      path_style: true
      region: us-east-1
      access_key_id: %s
      secret_access_key: %s
`, s3.Bucket, p.URL, s3.AccessKey, s3.SecretKey)
	var src *testsource.Source
	rd := daemontest.Start(t, yml, daemon.Options{Venues: []venues.Venue{{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) {
		src = testsource.New("coinbase", c)
		return src, nil
	}}}})
	const stream = venue.Stream("coinbase:level2:BTC-USD")
	sub := subscribe(t, rd.URL("ws")+"/v1/stream", string(stream))
	i := 0
	publish := func(n int) {
		for range n {
			i++
			ev := &venue.Event{Kind: venue.KindBook, Stream: stream, Snapshot: i == 1,
				Bids: []venue.Level{{Price: decimal.New(int64(9900+i%50), -2), Size: decimal.New(int64(1+i%7), 0)}},
				Asks: []venue.Level{{Price: decimal.New(int64(10100+i%50), -2), Size: decimal.New(int64(1+i%5), 0)}}}
			src.Publish(ev)
		}
	}
	latest := rd.URL("http") + "/v1/snapshots/coinbase/BTC-USD/latest"
	// latestSeq is the seq of the newest snapshot claim announced, and its URL.
	latestSeq := func() (uint64, string) {
		code, h, _ := httpGet(t, latest)
		if code != 200 {
			return 0, ""
		}
		n, _ := strconv.ParseUint(h.Get("X-Claim-Seq"), 10, 64)
		return n, h.Get("X-Claim-Url")
	}
	publish(1)
	waitFor(t, 15*time.Second, "the first snapshot claim", func() bool { publish(1); n, _ := latestSeq(); return n > 0 })

	for _, f := range []struct {
		name   string
		inject func()
		status int
		codes  []string // any of
		retry  string
	}{
		{"throttle", func() { p.Throttle(0.001, 0) }, 503, []string{"store_unavailable"}, "1"},
		{"hang", func() { p.Set(claimchecktest.FaultHang) }, 503, []string{"deadline", "store_unavailable"}, "1"},
		{"forbidden", func() { p.Set(claimchecktest.FaultForbidden) }, 503, []string{"store_forbidden"}, "60"},
		{"reset", func() { p.Set(claimchecktest.FaultReset) }, 503, []string{"store_unavailable"}, "1"},
	} {
		t.Run(f.name, func(t *testing.T) {
			before, claimURL := latestSeq()
			if claimURL == "" {
				t.Fatal("no snapshot claim before the fault")
			}
			f.inject()
			start := time.Now()
			code, h, body := httpGet(t, rd.URL("http")+claimURL)
			took := time.Since(start)
			if code != f.status || !containsAny(body, f.codes) || h.Get("Retry-After") != f.retry {
				t.Errorf("claim read under %s: %d Retry-After %q %s; want %d %v Retry-After %s", f.name, code, h.Get("Retry-After"), body, f.status, f.codes, f.retry)
			}
			if strings.Contains(body, "secret detail") || strings.Contains(body, "AccessDenied") {
				t.Errorf("the store's own error body was echoed: %s", body)
			}
			if took > 5*time.Second {
				t.Errorf("claim read under %s took %v (read_deadline_ms is 1500)", f.name, took)
			}
			// Alive: health, and events still flow while the store fails.
			if code, _, _ := httpGet(t, rd.URL("http")+"/healthz"); code != 200 {
				t.Errorf("/healthz %d under %s", code, f.name)
			}
			from := len(sub.snapshot())
			publish(3)
			waitFor(t, 10*time.Second, "events during the fault", func() bool {
				return sub.has(from, func(l line) bool { return l.Stream == string(stream) })
			})
			time.Sleep(300 * time.Millisecond) // a check-in or two fail
			p.Set(claimchecktest.FaultNone)
			waitFor(t, 20*time.Second, "snapshot check-in to resume", func() bool {
				publish(1)
				n, _ := latestSeq()
				return n > before
			})
			_, u := latestSeq()
			if code, _, body := httpGet(t, rd.URL("http")+u); code != 200 {
				t.Errorf("claim read after %s healed: %d %s", f.name, code, body)
			}
		})
	}
	sub.gapless(t, string(stream))
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, `"code":"`+x+`"`) {
			return true
		}
	}
	return false
}
