package ui_test

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// rgba parses a computed CSS colour, rgb(r, g, b) or rgba(r, g, b, a).
func rgba(t *testing.T, s string) (c [3]float64, a float64) {
	t.Helper()
	in, ok := strings.CutSuffix(s, ")")
	if i := strings.IndexByte(in, '('); ok && i > 0 && (in[:i] == "rgb" || in[:i] == "rgba") {
		f := strings.FieldsFunc(in[i+1:], func(r rune) bool { return r == ',' || r == ' ' || r == '/' })
		if len(f) == 3 || len(f) == 4 {
			a = 1
			var err error
			for j := range 3 {
				if c[j], err = strconv.ParseFloat(f[j], 64); err != nil {
					break
				}
			}
			if err == nil && len(f) == 4 {
				a, err = strconv.ParseFloat(f[3], 64)
			}
			if err == nil {
				return c, a
			}
		}
	}
	t.Fatalf("a colour the test cannot read: %q", s)
	return
}

// over composites c with alpha a over the opaque colour bg.
func over(c [3]float64, a float64, bg [3]float64) [3]float64 {
	for i := range c {
		c[i] = c[i]*a + bg[i]*(1-a)
	}
	return c
}

// luminance is WCAG 2's relative luminance of an sRGB colour (0–255).
func luminance(c [3]float64) float64 {
	var l [3]float64
	for i, v := range c {
		v /= 255
		if v <= 0.04045 {
			l[i] = v / 12.92
		} else {
			l[i] = math.Pow((v+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*l[0] + 0.7152*l[1] + 0.0722*l[2]
}

// contrast is WCAG 2's contrast ratio of the colour fg over the stack of
// backgrounds bgs (innermost first, as an element's ancestors give them;
// the page's canvas, white, under the outermost).
func contrast(t *testing.T, fg string, bgs []string) float64 {
	t.Helper()
	bg := [3]float64{255, 255, 255}
	for i := len(bgs) - 1; i >= 0; i-- {
		c, a := rgba(t, bgs[i])
		bg = over(c, a, bg)
	}
	c, a := rgba(t, fg)
	l1, l2 := luminance(over(c, a, bg)), luminance(bg)
	return (max(l1, l2) + 0.05) / (min(l1, l2) + 0.05)
}

// layoutJS measures the page: what sticks out sideways (outside an
// element that scrolls or clips it), and where the main sections are.
const layoutJS = `(() => {
  const W = document.documentElement.clientWidth;
  const desc = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (typeof e.className === 'string' && e.className ? '.' + e.className.split(' ').join('.') : '');
  const inScroller = (e) => {
    for (let n = e.parentElement; n && n !== document.body; n = n.parentElement) if (getComputedStyle(n).overflowX !== 'visible') return true;
    return false;
  };
  const out = {width: W, innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, overflow: [], sections: []};
  for (const e of document.querySelectorAll('body *')) {
    if (e.closest('.skip')) continue;
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    if ((r.right > W + 0.5 || r.left < -0.5) && !inScroller(e)) out.overflow.push(desc(e) + ' ' + Math.round(r.left) + '–' + Math.round(r.right));
  }
  for (const sel of ['header', '#token-input', '#stream', '#book-panel', '#depth', '#trades', '#venues', '#venue-table', '#subscribers', '#sub-table', '#claimcheck', '#store-table']) {
    // A wide table scrolls sideways in its own box: that box is what must fit.
    const t = document.querySelector(sel), e = t.closest('.scroll') || t, r = e.getBoundingClientRect();
    out.sections.push({sel, shown: e.checkVisibility({visibilityProperty: true}), left: r.left, right: r.right, width: r.width, height: r.height,
      scrolls: e !== t && e.scrollWidth > e.clientWidth});
  }
  return out;
})()`

// textJS lists every visible element that holds text of its own, with
// its colour, the backgrounds under it and its size.
const textJS = `(() => {
  const out = [];
  for (const e of document.querySelectorAll('body *')) {
    if (![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    if (!e.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height || r.right <= 0 || r.bottom <= 0) continue;
    const cs = getComputedStyle(e);
    const bg = [];
    for (let n = e; n; n = n.parentElement) bg.push(getComputedStyle(n).backgroundColor);
    out.push({what: e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''), text: e.textContent.trim().slice(0, 30),
      color: cs.color, bg, size: parseFloat(cs.fontSize), weight: parseInt(cs.fontWeight)});
  }
  return out;
})()`

// scheme returns pg, or a page like it, that prefers the colour scheme
// ("light" or "dark"): Chromium emulates it; Firefox has no BiDi command
// for it, so a dark page is a second Firefox whose profile prefers dark.
func scheme(t *testing.T, pg page, scheme string) page {
	t.Helper()
	switch pg := pg.(type) {
	case *chromiumPage:
		if _, err := chromedp.Call(pg.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			t.Fatal(err)
		}
	case *firefoxPage:
		if scheme == "dark" {
			return firefox(t, map[string]any{"layout.css.prefers-color-scheme.content-override": 0})
		}
	}
	return pg
}

// TestPageLayoutAndColors: the stream view of a replayed book, in light
// and in dark mode (prefers-color-scheme), at 1280×800 and at 390×844: the
// page never scrolls sideways and nothing sticks out of it (wide tables
// scroll inside their own box), the main sections are shown within the
// width, and every piece of text on the page has a WCAG contrast of at
// least 4.5 against what is under it (3 for large text). In Chromium and
// in Firefox.
func TestPageLayoutAndColors(t *testing.T) { eachBrowser(t, testLayoutAndColors) }

func testLayoutAndColors(t *testing.T, first page) {
	base := replayDaemon(t)
	const stream = "coinbase:level2:BTC-USD"
	for _, mode := range []string{"light", "dark"} {
		pg := scheme(t, first, mode)
		for _, vp := range [][2]int{{1280, 800}, {390, 844}} {
			name := fmt.Sprintf("%s-%dx%d", mode, vp[0], vp[1])
			pg.viewport(t, vp[0], vp[1])
			pg.navigate(t, base+"/?stream="+url.QueryEscape(stream))
			var n struct{ Dark, Bids, Venues, Streams, Subs, Stores int }
			waitFor(t, 20*time.Second, name+": the page never filled its book, venues, subscribers and stores", func() bool {
				pg.eval(t, `({Dark: +matchMedia('(prefers-color-scheme: dark)').matches,
					Bids: document.querySelectorAll('#book-bids tbody tr').length, Venues: document.querySelectorAll('#venue-table tbody tr').length,
					Streams: document.querySelectorAll('#stream-table tbody tr').length, Subs: document.querySelectorAll('#sub-table tbody tr').length,
					Stores: document.querySelectorAll('#store-table tbody tr').length})`, &n)
				return n.Bids > 0 && n.Venues == 5 && n.Streams > 0 && n.Subs > 0 && n.Stores > 0
			})
			if (n.Dark == 1) != (mode == "dark") {
				t.Fatalf("%s: prefers-color-scheme dark matches: %v", name, n.Dark == 1)
			}

			var lay struct {
				Width       float64  `json:"width"` // without a classic scrollbar (Firefox's)
				InnerWidth  float64  `json:"innerWidth"`
				ScrollWidth float64  `json:"scrollWidth"`
				Overflow    []string `json:"overflow"`
				Sections    []struct {
					Sel                        string
					Shown, Scrolls             bool
					Left, Right, Width, Height float64
				} `json:"sections"`
			}
			pg.eval(t, layoutJS, &lay)
			if lay.InnerWidth != float64(vp[0]) || lay.ScrollWidth > lay.Width {
				t.Errorf("%s: the page is %.0f px wide in a %.0f px viewport (%.0f px inside its scrollbar); want %d, no sideways scrolling",
					name, lay.ScrollWidth, lay.InnerWidth, lay.Width, vp[0])
			}
			if len(lay.Overflow) > 0 {
				t.Errorf("%s: sticking out sideways: %s", name, strings.Join(lay.Overflow, "; "))
			}
			var scrolls []string
			for _, s := range lay.Sections {
				if s.Scrolls {
					scrolls = append(scrolls, s.Sel)
				}
				if !s.Shown || s.Width <= 0 || s.Height <= 0 || s.Left < -0.5 || s.Right > lay.Width+0.5 {
					t.Errorf("%s: %s not shown within the width: %+v", name, s.Sel, s)
				}
			}

			var texts []struct {
				What, Text, Color string
				BG                []string
				Size              float64
				Weight            int
			}
			pg.eval(t, textJS, &texts)
			if len(texts) < 100 {
				t.Fatalf("%s: only %d pieces of text found", name, len(texts))
			}
			worst, worstWhat := math.Inf(1), ""
			for _, x := range texts {
				want := 4.5
				if x.Size >= 24 || x.Size >= 18.66 && x.Weight >= 700 {
					want = 3
				}
				r := contrast(t, x.Color, x.BG)
				if r < want {
					t.Errorf("%s: %s %q: %s on %v: contrast %.2f, want ≥ %.1f", name, x.What, x.Text, x.Color, x.BG[:min(3, len(x.BG))], r, want)
				}
				if r < worst {
					worst, worstWhat = r, x.What+" "+strconv.Quote(x.Text)
				}
			}
			t.Logf("%s: %d px wide, no sideways overflow (tables scrolling in their own box: %v); %d pieces of text, lowest contrast %.2f (%s)",
				name, vp[0], scrolls, len(texts), worst, worstWhat)
			pg.screenshot(t, name)
		}
	}
}
