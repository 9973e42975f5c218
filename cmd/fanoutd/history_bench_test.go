package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
	"github.com/fanoutd/fanoutd/internal/daemon"
)

// BenchmarkHistoryFirstByte is how soon a history answer starts against
// one segment read: a query of three segments of one connection, checked
// in to an S3 store (gofakes3) behind a proxy that delays every store
// request by 20 ms, with the reader's cache off so that every op reads the
// store. Each op times one segment read (GET /v1/claims of the first
// segment: the same reader, Locate and Bytes) and then the query's status
// and headers and its first line; the metrics are their medians in ms and
// the ratios to the segment read (1 is "within one segment read").
func BenchmarkHistoryFirstByte(b *testing.B) {
	s3 := claimchecktest.FakeS3(b)
	proxy := claimchecktest.NewFaultProxy(b, s3.Endpoint)
	cfgPath := writeConfig(b, fmt.Sprintf(`
tokens:
  - {name: all, token: all-secret}
claim_check:
  cache_bytes: 0
  stores:
    - {kind: s3, endpoint: %q, region: us-east-1, bucket: %s, path_style: true, access_key_id: %s, secret_access_key: %s}
venues:
  kraken:
    ws_url: ws://127.0.0.1:1/
    symbols: []
`, proxy.URL, s3.Bucket, s3.AccessKey, s3.SecretKey))
	segs := shiftedCopies(b, filepath.Join("..", "..", "testdata", "replay", "coinbase.jsonl.gz"), b.TempDir(), 3)
	out := importCaptures(b, cfgPath, segs...)
	line, _, _ := strings.Cut(out, "\n")
	claim := line[strings.LastIndex(line, ": ")+2:] // the first segment's tenant/claim id
	ld := startLiveDaemon(b, cfgPath, daemon.Options{})
	ranges := listHistory(b, ld.addr, "all-secret")
	u := streamURL(ld.addr, "coinbase:level2:"+ranges[0].Symbol, ranges[0].From, ranges[0].To.Add(time.Nanosecond))
	proxy.Delay(20 * time.Millisecond)

	get := func(u string) *http.Response {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer all-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", u, resp.StatusCode)
		}
		return resp
	}
	var seg, head, first []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		resp := get("http://" + ld.addr + "/v1/claims/" + claim)
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		seg = append(seg, time.Since(t0))

		t0 = time.Now()
		resp = get(u)
		head = append(head, time.Since(t0))
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		first = append(first, time.Since(t0))
		b.StopTimer()
		if _, err := io.Copy(io.Discard, br); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		b.StartTimer()
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	s, h, f := median(seg), median(head), median(first)
	b.ReportMetric(ms(s), "segment-read-ms")
	b.ReportMetric(ms(h), "headers-ms")
	b.ReportMetric(ms(f), "first-line-ms")
	b.ReportMetric(float64(h)/float64(s), "headers/segment-read")
	b.ReportMetric(float64(f)/float64(s), "first-line/segment-read")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
