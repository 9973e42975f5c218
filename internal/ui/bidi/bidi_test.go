package bidi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/ui/bidi"
)

// TestFirefox: a real headless Firefox loads a page from a local server,
// evaluates script in it, takes key presses and a screenshot, and closes.
func TestFirefox(t *testing.T) {
	bin := bidi.Find()
	if bin == "" {
		t.Skip("firefox is not installed (apt-get install firefox-esr): skipped")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><title>t</title><input id=a><input id=b><p>hello</p>`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := bidi.Start(ctx, bin, t.TempDir(), 640, 480, map[string]any{"layout.css.prefers-color-scheme.content-override": 0})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	t.Logf("firefox %s", b.Version)
	if err := b.Navigate(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Text  string `json:"text"`
		Width int    `json:"width"`
		Dark  bool   `json:"dark"`
	}
	if err := b.Eval(ctx, `({text: document.querySelector('p').textContent, width: window.innerWidth, dark: matchMedia('(prefers-color-scheme: dark)').matches})`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != "hello" || got.Width != 640 || !got.Dark {
		t.Fatalf("evaluated %+v, want hello at 640 px, dark (the extra pref)", got)
	}
	var n int
	if err := b.Eval(ctx, `Promise.resolve(6 * 7)`, &n); err != nil || n != 42 {
		t.Fatalf("awaited promise: %d, %v", n, err)
	}
	if err := b.Eval(ctx, `nosuchname.x`, nil); err == nil {
		t.Fatal("an exception in the page was not reported")
	}
	if err := b.Eval(ctx, `document.querySelector('#a').focus()`, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Keys(ctx, "\uE004"); err != nil {
		t.Fatal(err)
	}
	var focused string
	if err := b.Eval(ctx, `document.activeElement.id`, &focused); err != nil || focused != "b" {
		t.Fatalf("after Tab the focus is on %q (%v), want b", focused, err)
	}
	png, err := b.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG (%d bytes)", len(png))
	}
}

// TestStartReportsABrowserThatExits: a program that exits without opening
// a BiDi port is reported at once, not at the deadline.
func TestStartReportsABrowserThatExits(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := bidi.Start(ctx, bin, t.TempDir(), 640, 480, nil); err == nil || ctx.Err() != nil {
		t.Fatalf("Start of a program that exits: %v (context: %v)", err, ctx.Err())
	}
}
