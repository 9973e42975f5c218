package tardis_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
)

// tardisExchange is tardis's name of each compared venue.
var tardisExchange = map[string]string{"binance": "binance", "okx": "okex", "bybit": "bybit-spot"}

// historyDaemon checks captures in to a claim-check store of its own
// (fanoutd history import) and serves them from a daemon on 127.0.0.1:0;
// it returns the daemon's address.
func historyDaemon(t *testing.T, captures ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "fanoutd.yaml")
	yml := fmt.Sprintf(`
claim_check:
  stores: [{kind: dir, path: %s}]
venues:
  kraken: {ws_url: "ws://127.0.0.1:1/", symbols: []}
`, filepath.Join(dir, "store"))
	if err := os.WriteFile(cfgPath, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fanoutd(t), append([]string{"history", "import", "--config", cfgPath}, captures...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("history import: %v\n%s", err, out)
	}
	return daemontest.Start(t, yml, daemon.Options{Logger: slog.New(slog.DiscardHandler)}).Addr
}

// replayNormalized asks fanoutd's /replay-normalized for options.
func replayNormalized(t *testing.T, addr string, options map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(options)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/replay-normalized?options=" + url.QueryEscape(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-json-stream" {
		t.Fatalf("/replay-normalized: %d %s: %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return body
}

// captureMinutes is the [from, to) of whole minutes a capture covers, as
// run.js lays it out for tardis-dev.
func captureMinutes(t *testing.T, capture string) (from, to time.Time) {
	t.Helper()
	out := runTardis(t, capture, "--prepare", "--cache", t.TempDir())
	var p struct{ From, To time.Time }
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return p.From, p.To
}

// machineMsg is a normalized message of either side, its numbers as
// float64 (tardis's; fanoutd's exact decimals parse to the same) and its
// times as written.
type machineMsg struct {
	Type, Symbol, Exchange, ID, Side, Name string
	IsSnapshot                             bool
	Price, Amount                          float64
	Bids, Asks                             []struct{ Price, Amount float64 }
	Depth, Interval                        int
	Timestamp, LocalTimestamp              string
	keys                                   string // the object's keys, sorted
}

func machineMsgs(t *testing.T, out []byte) []machineMsg {
	t.Helper()
	var ms []machineMsg
	for _, l := range lines(out) {
		if len(l) == 0 {
			continue
		}
		var m machineMsg
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if err := json.Unmarshal(l, &raw); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		m.keys = fmt.Sprint(slices.Sorted(maps.Keys(raw)))
		ms = append(ms, m)
	}
	return ms
}

// conventions counts, per convention, the messages it applied to.
type conventions map[string]int

// toMicros applies the time convention: fanoutd writes the capture's
// 100 ns, tardis microseconds.
func (c conventions) toMicros(t *testing.T, s string) string {
	if s == "" {
		return s
	}
	at := parseTime(t, s)
	if at.Truncate(time.Microsecond) != at {
		c["time: 100 ns written, tardis truncates to µs"]++
	}
	return at.UTC().Format("2006-01-02T15:04:05.000000Z")
}

func (m machineMsg) String() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// TestReplayNormalizedMatchesTardis serves the testdata captures (with
// trades added) through fanoutd's tardis-machine route /replay-normalized
// and compares its messages with what tardis-machine writes for the same
// options: tardis-dev's replayNormalized on the same captures, laid out as
// its cache and run offline, through tardis-machine's normalizers, data-type
// filter and timestamp format (run.js --machine). Every message is the
// same, in the same order, once the conventions docs/history.md names are
// applied; each is counted in the log.
func TestReplayNormalizedMatchesTardis(t *testing.T) {
	needHarness(t)
	dir := t.TempDir()
	captures := map[string]string{}
	var all []string
	for _, v := range venues {
		captures[v] = withTrades(t, v, dir)
		all = append(all, captures[v])
	}
	addr := historyDaemon(t, all...)
	dataTypes := []string{"trade", "book_change", "quote", "book_snapshot_5_0ms", "book_snapshot_25_0ms"}
	for _, v := range venues {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			capture := captures[v]
			from, to := captureMinutes(t, capture)
			ours := machineMsgs(t, replayNormalized(t, addr, map[string]any{"exchange": tardisExchange[v], "from": from, "to": to,
				"dataTypes": dataTypes, "withDisconnectMessages": true}))
			theirs := machineMsgs(t, runTardis(t, capture, "--machine", strings.Join(dataTypes, ",")))
			conv := conventions{}
			types := map[string]int{}
			for i := range ours {
				ours[i].Timestamp = conv.toMicros(t, ours[i].Timestamp)
				ours[i].LocalTimestamp = conv.toMicros(t, ours[i].LocalTimestamp)
				types[ours[i].Type]++
			}
			conv.compare(t, v, ours, theirs)
			if types["trade"] == 0 || types["book_change"] == 0 || types["book_snapshot"] == 0 || types["disconnect"] == 0 {
				t.Fatalf("messages by type: %v", types)
			}
			t.Logf("%d messages equal (%v); conventions applied: %v", len(ours), types, conv)
		})
	}
}

// sameTime: two written times are the same instant (or both absent).
func sameTime(t *testing.T, a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	return parseTime(t, a).Equal(parseTime(t, b))
}

// compare fails t unless ours and theirs are the same messages in the same
// order, once the conventions are applied (and counted in c):
//   - times are instants: tardis writes milliseconds where it knows no
//     more, and fanoutd's are truncated to microseconds (toMicros);
//   - a book_snapshot's levels past the book's depth: tardis pads the list
//     to the depth with empty objects, fanoutd writes the levels there are;
//   - Bybit's book times: fanoutd's timestamp is the frame's cts (the
//     matching engine's time), tardis's its ts (the message's), a
//     millisecond or so later;
//   - after a disconnect tardis-dev's computables start afresh and write
//     their first snapshot even when it equals the last one before the drop;
//     fanoutd, continuing the stream, writes a snapshot only on a change.
func (c conventions) compare(t *testing.T, v string, ours, theirs []machineMsg) {
	t.Helper()
	last := map[string]string{} // name → levels of the last snapshot
	fresh := map[string]bool{}  // name → the first snapshot since a disconnect is still to come
	i, j := 0, 0
	for i < len(ours) || j < len(theirs) {
		if j < len(theirs) {
			th := &theirs[j]
			if th.Type == "disconnect" {
				for n := range last {
					fresh[n] = true
				}
			}
			if th.Type == "book_snapshot" {
				padded := false
				pad := func(ls []struct{ Price, Amount float64 }) []struct{ Price, Amount float64 } {
					for len(ls) > 0 && ls[len(ls)-1].Price == 0 && ls[len(ls)-1].Amount == 0 {
						ls, padded = ls[:len(ls)-1], true
					}
					return ls
				}
				th.Bids, th.Asks = pad(th.Bids), pad(th.Asks)
				if padded {
					c["book_snapshot: tardis pads the levels to the depth with {}"]++
				}
				levels := fmt.Sprint(th.Bids, th.Asks)
				repeated := fresh[th.Name] && last[th.Name] == levels
				fresh[th.Name] = false
				last[th.Name] = levels
				if repeated && (i >= len(ours) || ours[i].Type != "book_snapshot" || ours[i].Name != th.Name) {
					c["book_snapshot: tardis repeats the book after a disconnect"]++
					j++
					continue
				}
			}
		}
		if i >= len(ours) || j >= len(theirs) {
			t.Fatalf("fanoutd %d messages, tardis-dev %d (compared up to %d and %d)", len(ours), len(theirs), i, j)
		}
		a, b := ours[i], theirs[j]
		if a.keys != b.keys {
			t.Fatalf("message %d: fanoutd's keys %s, tardis-dev's %s", i, a.keys, b.keys)
		}
		if !sameTime(t, a.Timestamp, b.Timestamp) {
			if v != "bybit" || a.Type == "trade" || parseTime(t, a.Timestamp).After(parseTime(t, b.Timestamp)) {
				t.Fatalf("message %d: timestamp %s, tardis-dev %s:\nfanoutd      %v\ntardis-dev   %v", i, a.Timestamp, b.Timestamp, a, b)
			}
			c["bybit: timestamp is cts, tardis ts"]++
		}
		a.Timestamp, b.Timestamp = "", ""
		if !sameTime(t, a.LocalTimestamp, b.LocalTimestamp) {
			t.Fatalf("message %d: localTimestamp %s, tardis-dev %s", i, a.LocalTimestamp, b.LocalTimestamp)
		}
		a.LocalTimestamp, b.LocalTimestamp = "", ""
		if a.String() != b.String() {
			t.Fatalf("message %d differs:\nfanoutd      %v\ntardis-dev   %v", i, a, b)
		}
		i++
		j++
	}
}
