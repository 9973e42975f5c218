package ui_test

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	"github.com/shopspring/decimal"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testsource"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

// sub is one entry of /v1/subscribers, as the tests read it.
type sub struct {
	ID       string                    `json:"id"`
	Kind     string                    `json:"kind"`
	Attached bool                      `json:"attached"`
	Streams  []string                  `json:"streams"`
	QueueLen int                       `json:"queue_len"`
	Bounds   map[string]map[string]int `json:"bounds"`
	Dropping bool                      `json:"dropping"`
	Dropped  uint64                    `json:"dropped_total"`
	Replaced uint64                    `json:"replaced_total"`
}

// sortKey is what a subscribers column sorts by: the queue by its fill
// against the smallest bound, the streams by their count, yes above no.
func (s sub) sortKey(key string) (float64, string) {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	switch key {
	case "id":
		return 0, s.ID
	case "kind":
		return 0, s.Kind
	case "attached":
		return b2f(s.Attached), ""
	case "streams":
		return float64(len(s.Streams)), ""
	case "fill":
		bound := 0
		for _, b := range s.Bounds {
			if n := b["max_queue_len"]; n > 0 && (bound == 0 || n < bound) {
				bound = n
			}
		}
		if bound == 0 {
			return 0, ""
		}
		return float64(s.QueueLen) / float64(bound), ""
	case "dropping":
		return b2f(s.Dropping), ""
	case "dropped_total":
		return float64(s.Dropped), ""
	case "replaced_total":
		return float64(s.Replaced), ""
	}
	panic(key)
}

// sortedIDs orders subs by key in dir (1 ascending, -1 descending), ties by
// id ascending: the order the page must show.
func sortedIDs(subs []sub, key string, dir int) []string {
	subs = slices.Clone(subs)
	slices.SortStableFunc(subs, func(a, b sub) int {
		an, as := a.sortKey(key)
		bn, bs := b.sortKey(key)
		if c := cmp.Compare(an, bn) + cmp.Compare(as, bs); c != 0 {
			return c * dir
		}
		return cmp.Compare(a.ID, b.ID)
	})
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.ID
	}
	return ids
}

var sortKeys = []string{"id", "kind", "attached", "streams", "fill", "dropping", "dropped_total", "replaced_total"}

// focused describes the page's focused element: what it is, whether it
// matches :focus-visible, its outline, whether a scrolling or clipping
// ancestor cuts the outline off, and the background under it.
const focused = `(() => {
  const e = document.activeElement;
  const cs = getComputedStyle(e);
  const w = parseFloat(cs.outlineWidth) || 0, off = parseFloat(cs.outlineOffset) || 0;
  const r = e.getBoundingClientRect(), m = w + off;
  let clippedBy = '';
  for (let n = e.parentElement; n && n !== document.documentElement; n = n.parentElement) {
    const s = getComputedStyle(n);
    if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
    const c = n.getBoundingClientRect();
    if (r.left - m < c.left - 0.5 || r.right + m > c.right + 0.5 || r.top - m < c.top - 0.5 || r.bottom + m > c.bottom + 0.5) {
      clippedBy = n.tagName.toLowerCase() + (n.id ? '#' + n.id : '') + '.' + n.className;
      break;
    }
  }
  const bg = [];
  for (let n = e.parentElement; n; n = n.parentElement) bg.push(getComputedStyle(n).backgroundColor);
  return {tag: e.tagName.toLowerCase(), id: e.id, href: e.getAttribute('href') || '',
    key: (e.closest('th[data-key]') || {dataset: {}}).dataset.key || '', text: e.textContent.trim().slice(0, 40),
    focusVisible: e.matches(':focus-visible'), outlineStyle: cs.outlineStyle, outlineWidth: w, outlineColor: cs.outlineColor,
    clippedBy, bg};
})()`

type focusInfo struct {
	Tag          string   `json:"tag"`
	ID           string   `json:"id"`
	Href         string   `json:"href"`
	Key          string   `json:"key"`
	Text         string   `json:"text"`
	FocusVisible bool     `json:"focusVisible"`
	OutlineStyle string   `json:"outlineStyle"`
	OutlineWidth float64  `json:"outlineWidth"`
	OutlineColor string   `json:"outlineColor"`
	ClippedBy    string   `json:"clippedBy"`
	BG           []string `json:"bg"`
}

func (f focusInfo) String() string {
	return strings.TrimSpace(f.Tag + "#" + f.ID + " " + f.Href + " " + f.Key + " " + strconv.Quote(f.Text))
}

// TestPageKeyboardAndSorting: in Chromium, with five subscribers of
// different kinds, streams, fill and drops, the Tab key alone reaches the
// token field, the stream view links and every sort header of the
// subscribers table, in that order, each with a visible focus ring that
// nothing clips and that stands out from its background; a focused link
// keeps its focus across the page's refresh; Enter and Space on a sort
// header sort the table by that column, pressing again reverses it, and
// the rows are in the order /v1/subscribers gives for that column (ties
// by id); every focusable element has an accessible name.
func TestPageKeyboardAndSorting(t *testing.T) {
	pg := chromium(t)
	var src *testsource.Source
	v := venues.Venue{Name: "coinbase", New: func(c venue.Config) (venue.Adapter, error) { src = testsource.New("coinbase", c); return src, nil }}
	d := daemontest.Start(t, "venues:\n  coinbase:\n    symbols: [BTC-USD, ETH-USD]\n    max_queue_len: 50\nwebsocket:\n  send_buffer_bytes: 4096\n  write_delay: 0s\n",
		daemon.Options{Venues: []venues.Venue{v}})
	base := d.URL("http")
	btc, eth := venue.Stream("coinbase:trades:BTC-USD"), venue.Stream("coinbase:trades:ETH-USD")

	// The subscribers: one stalled (small socket buffers, never reads),
	// three reading (two named, one ephemeral; one of them on two streams),
	// and one named that went away (detached).
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the connections close: cleanups run last first
	dial := func(name string, stall bool, streams ...venue.Stream) *websocket.Conn {
		t.Helper()
		dialer := websocket.Dialer{ReadBufferSize: 1024}
		if stall {
			dialer.NetDial = func(network, addr string) (net.Conn, error) {
				c, err := net.Dial(network, addr)
				if err == nil {
					c.(*net.TCPConn).SetReadBuffer(4096)
				}
				return c, err
			}
		}
		u := d.URL("ws") + "/v1/stream"
		if name != "" {
			u += "?name=" + name
		}
		ws, _, err := dialer.Dial(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": streams})
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := ws.ReadMessage(); err != nil { // the ack
			t.Fatal(err)
		}
		ws.SetReadDeadline(time.Time{})
		if !stall {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, _, err := ws.ReadMessage(); err != nil {
						return
					}
				}
			}()
		}
		return ws
	}
	dial("stalled", true, btc)
	dial("alpha", false, btc, eth)
	dial("zulu", false, eth)
	dial("", false, btc)
	dial("bravo", false, eth).Close()

	subs := func() []sub {
		var s []sub
		if code := getJSON(t, base+"/v1/subscribers", &s); code != http.StatusOK {
			t.Fatalf("/v1/subscribers: %d", code)
		}
		return s
	}
	seq := 0
	// Small bursts, which the readers keep up with, until the one that does
	// not read drops.
	waitFor(t, 30*time.Second, "the stalled subscriber never dropped, or bravo never detached", func() bool {
		for range 10 {
			seq++
			s := btc
			if seq%2 == 0 {
				s = eth
			}
			src.Publish(&venue.Event{Kind: venue.KindTrade, Stream: s, TradeID: strconv.Itoa(seq),
				Price: decimal.New(int64(50000+seq%100), 0), Size: decimal.New(1, -2), Side: venue.SideBuy, RecvTime: time.Now()})
		}
		var stalled, detached bool
		for _, s := range subs() {
			stalled = stalled || s.ID == "stalled" && s.Dropping && s.Dropped > 0
			detached = detached || s.ID == "bravo" && !s.Attached
		}
		return stalled && detached
	})
	// Publishing stops here: the values the table sorts by hold still.

	pg.navigate(t, base+"/")
	waitFor(t, 10*time.Second, "the page never listed the two streams and five subscribers", func() bool {
		var n struct{ Links, Subs int }
		pg.eval(t, `({Links: document.querySelectorAll('#stream-table a[href^="/?stream="]').length, Subs: document.querySelectorAll('#sub-table tbody tr').length})`, &n)
		return n.Links == 2 && n.Subs == 5
	})

	// Tab through the page from its start.
	var seen []focusInfo
	for len(seen) < 150 {
		pg.keys(t, "\t")
		var f focusInfo
		pg.eval(t, focused, &f)
		seen = append(seen, f)
		if f.Key == sortKeys[len(sortKeys)-1] {
			break
		}
		if strings.HasPrefix(f.Href, "/?stream=") && !slices.ContainsFunc(seen[:len(seen)-1], func(g focusInfo) bool { return g.Href != "" && strings.HasPrefix(g.Href, "/?stream=") }) {
			// The first stream link: it keeps the focus while the page refreshes the table around it.
			var age0, age string
			ageOf := `document.querySelector('#stream-table a[href="` + f.Href + `"]').closest('tr').cells[1].textContent`
			pg.eval(t, ageOf, &age0)
			waitFor(t, 10*time.Second, "the stream table never refreshed", func() bool { pg.eval(t, ageOf, &age); return age != age0 })
			var still string
			pg.eval(t, `document.activeElement.getAttribute('href')`, &still)
			if still != f.Href {
				t.Fatalf("the focused stream link %s lost the focus when the table refreshed (now on %q)", f.Href, still)
			}
		}
	}
	at := func(match func(focusInfo) bool) int { return slices.IndexFunc(seen, match) }
	token := at(func(f focusInfo) bool { return f.ID == "token-input" })
	link := at(func(f focusInfo) bool { return strings.HasPrefix(f.Href, "/?stream=") })
	var headers []int
	for _, k := range sortKeys {
		headers = append(headers, at(func(f focusInfo) bool { return f.Key == k && f.Tag == "button" }))
	}
	var order []string
	for _, f := range seen {
		order = append(order, f.String())
	}
	t.Logf("tab order (%d stops): %s", len(seen), strings.Join(order, " → "))
	if token < 0 || link < 0 || slices.Contains(headers, -1) {
		t.Fatalf("Tab did not reach every control: token field at %d, a stream link at %d, sort headers %v at %v", token, link, sortKeys, headers)
	}
	if !(token < link && link < headers[0] && slices.IsSorted(headers)) {
		t.Fatalf("tab order: token field at %d, first stream link at %d, sort headers at %v: want them in that order", token, link, headers)
	}
	for _, f := range seen {
		if !f.FocusVisible || f.OutlineStyle == "none" || f.OutlineWidth < 2 {
			t.Errorf("%s: focus not visible (:focus-visible %v, outline %s %.1fpx)", f, f.FocusVisible, f.OutlineStyle, f.OutlineWidth)
		}
		if f.ClippedBy != "" {
			t.Errorf("%s: its focus ring is cut off by %s", f, f.ClippedBy)
		}
		if r := contrast(t, f.OutlineColor, f.BG); r < 3 {
			t.Errorf("%s: focus ring %s against its background: contrast %.2f, want ≥ 3", f, f.OutlineColor, r)
		}
	}
	pg.screenshot(t, "keyboard-focus")

	// Sort by each column from the keyboard: Enter on one header, Space on
	// the next; again to reverse.
	for i, key := range sortKeys {
		press := "\r"
		if i%2 == 1 {
			press = " "
		}
		pg.eval(t, `document.querySelector('#sub-table th[data-key="`+key+`"] button').focus() ?? null`, new(any))
		var first string
		for round := range 2 {
			pg.keys(t, press)
			var st struct {
				Sort   string   `json:"sort"`
				Others int      `json:"others"`
				IDs    []string `json:"ids"`
				Focus  string   `json:"focus"`
			}
			var want []string
			// The rows against /v1/subscribers, as the page refreshes them.
			waitFor(t, 10*time.Second, "sorted by "+key+": the rows never took the order of /v1/subscribers", func() bool {
				pg.eval(t, `({sort: document.querySelector('#sub-table th[data-key="`+key+`"]').getAttribute('aria-sort') || '',
					others: document.querySelectorAll('#sub-table th[aria-sort]').length,
					ids: [...document.querySelectorAll('#sub-table tbody tr')].map(r => r.dataset.id),
					focus: (document.activeElement.closest('th') || {dataset: {}}).dataset.key || ''})`, &st)
				dir := map[string]int{"ascending": 1, "descending": -1}[st.Sort]
				switch {
				case dir == 0:
					t.Fatalf("sorted by %s (key %q): aria-sort is %q", key, press, st.Sort)
				case st.Others != 1:
					t.Fatalf("sorted by %s: %d headers carry aria-sort, want 1", key, st.Others)
				case round == 1 && st.Sort == first:
					t.Fatalf("pressing %q again on %s kept it %s", press, key, st.Sort)
				case st.Focus != key:
					t.Fatalf("after sorting by %s the focus moved to %q", key, st.Focus)
				}
				all := subs()
				want = sortedIDs(all, key, dir)
				if !slices.Equal(st.IDs, want) {
					t.Logf("sorted by %s %s: rows %v, want %v (from /v1/subscribers: %+v)", key, st.Sort, st.IDs, want, all)
					return false
				}
				return true
			})
			first = st.Sort
			t.Logf("sorted by %s %s: %v", key, st.Sort, st.IDs)
		}
	}
	pg.screenshot(t, "keyboard-sorted")

	// Every control the keyboard can reach has an accessible name.
	ctx, cancel := context.WithTimeout(pg.ctx, 30*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		role := strings.Trim(string(n.Role.Value), `"`)
		focusable := slices.ContainsFunc(n.Properties, func(p *accessibility.Property) bool {
			return p.Name == "focusable" && string(p.Value.Value) == "true"
		})
		if !focusable || role == "RootWebArea" || role == "main" {
			continue
		}
		name := ""
		if n.Name != nil {
			name = strings.Trim(string(n.Name.Value), `"`)
		}
		if strings.TrimSpace(name) == "" {
			t.Errorf("a focusable %s has no accessible name", role)
		}
		named++
	}
	if named < 2+len(sortKeys)+5 {
		t.Errorf("only %d focusable elements in the accessibility tree", named)
	}
}
