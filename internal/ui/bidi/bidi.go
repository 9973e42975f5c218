// Package bidi drives a headless Firefox over WebDriver BiDi, the W3C
// protocol Firefox speaks natively on --remote-debugging-port (no
// geckodriver): enough of it for the operator page's browser tests
// (session.new, browsingContext.navigate, setViewport, captureScreenshot,
// script.evaluate, input.performActions). No Go BiDi client is kept well
// enough to use; see docs/design.md.
package bidi

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// Find returns the path of an installed Firefox, or "" if there is none.
func Find() string {
	for _, name := range []string{"firefox-esr", "firefox"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// prefs keep a test's Firefox off the network (the machine has none) and
// quiet: no updates, telemetry, safe-browsing lists, captive-portal or
// connectivity probes, remote settings or first-run pages. Firefox's remote
// agent adds its own recommended prefs on top.
const prefs = `user_pref("app.update.disabledForTesting", true);
user_pref("app.update.auto", false);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("browser.startup.page", 0);
user_pref("browser.newtabpage.enabled", false);
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.safebrowsing.malware.enabled", false);
user_pref("browser.safebrowsing.phishing.enabled", false);
user_pref("browser.safebrowsing.downloads.enabled", false);
user_pref("browser.safebrowsing.blockedURIs.enabled", false);
user_pref("browser.search.update", false);
user_pref("browser.region.network.url", "");
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("toolkit.telemetry.enabled", false);
user_pref("toolkit.telemetry.server", "");
user_pref("extensions.update.enabled", false);
user_pref("extensions.getAddons.cache.enabled", false);
user_pref("network.captive-portal-service.enabled", false);
user_pref("network.connectivity-service.enabled", false);
user_pref("network.dns.disablePrefetch", true);
user_pref("network.prefetch-next", false);
user_pref("services.settings.server", "http://127.0.0.1:9/");
user_pref("geo.provider.network.url", "");
user_pref("media.gmp-manager.url", "http://127.0.0.1:9/");
`

// Browser is a running Firefox with one BiDi session and the browsing
// context (tab) it opened with.
type Browser struct {
	cmd     *exec.Cmd
	conn    *websocket.Conn
	Context string // the tab's browsing context id
	Version string

	wmu     sync.Mutex // serialises writes to conn
	mu      sync.Mutex // protects the fields below
	nextID  int
	pending map[int]chan response
	readErr error
	done    chan struct{} // closed when the reader stops

	stderr  *tail
	closeMu sync.Once
}

type response struct {
	ID      *int            `json:"id"`
	Type    string          `json:"type"` // success, error, event
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

// tail keeps the last lines Firefox wrote to stderr, for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, l)
	if len(t.lines) > 30 {
		t.lines = t.lines[len(t.lines)-30:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

var listening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// Start runs bin headless with a fresh profile in dir (which it fills),
// with extra prefs on top of its own (such as
// "layout.css.prefers-color-scheme.content-override": 0 for dark pages),
// waits up to the context's deadline for its BiDi endpoint, opens a
// session and sets the tab's viewport to width×height.
func Start(ctx context.Context, bin, dir string, width, height int, extra map[string]any) (*Browser, error) {
	js := prefs
	for k, v := range extra {
		kj, _ := json.Marshal(k)
		vj, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		js += fmt.Sprintf("user_pref(%s, %s);\n", kj, vj)
	}
	if err := os.WriteFile(filepath.Join(dir, "user.js"), []byte(js), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--headless", "--no-remote", "-profile", dir, "--remote-debugging-port", "0", "about:blank")
	// MOZ_HEADLESS for the processes it starts; HOME in the profile so that
	// nothing is written under root's home; its own process group so that
	// Close ends its content processes with it.
	cmd.Env = append(os.Environ(), "MOZ_HEADLESS=1", "HOME="+dir, "MOZ_CRASHREPORTER_DISABLE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &Browser{cmd: cmd, pending: map[int]chan response{}, done: make(chan struct{}), stderr: &tail{}}
	found := make(chan string, 1)
	ended := make(chan struct{}) // stderr closed: Firefox exited
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			l := sc.Text()
			b.stderr.add(l)
			if m := listening.FindStringSubmatch(l); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var endpoint string
	select {
	case endpoint = <-found:
	case <-ended:
		b.Close()
		return nil, fmt.Errorf("firefox exited before it opened its BiDi port; stderr:\n%s", b.stderr)
	case <-ctx.Done():
		b.Close()
		return nil, fmt.Errorf("firefox did not open its BiDi port: %w; stderr:\n%s", ctx.Err(), b.stderr)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, _, err := d.DialContext(ctx, endpoint+"/session", nil)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bidi dial %s: %w", endpoint, err)
	}
	b.conn = conn
	go b.read()

	var sess struct {
		Capabilities struct {
			BrowserVersion string `json:"browserVersion"`
		} `json:"capabilities"`
	}
	if err := b.Call(ctx, "session.new", map[string]any{"capabilities": map[string]any{}}, &sess); err != nil {
		b.Close()
		return nil, err
	}
	b.Version = sess.Capabilities.BrowserVersion
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := b.Call(ctx, "browsingContext.getTree", map[string]any{}, &tree); err != nil || len(tree.Contexts) == 0 {
		b.Close()
		return nil, fmt.Errorf("browsingContext.getTree: %v (%d contexts)", err, len(tree.Contexts))
	}
	b.Context = tree.Contexts[0].Context
	if err := b.SetViewport(ctx, width, height); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// read dispatches responses to their callers; events are not subscribed
// to, and anything else is dropped.
func (b *Browser) read() {
	defer close(b.done)
	for {
		_, msg, err := b.conn.ReadMessage()
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var r response
		if json.Unmarshal(msg, &r) != nil || r.ID == nil {
			continue
		}
		b.mu.Lock()
		ch := b.pending[*r.ID]
		delete(b.pending, *r.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// Call sends one command and decodes its result into out (nil: ignored).
func (b *Browser) Call(ctx context.Context, method string, params, out any) error {
	b.mu.Lock()
	if b.readErr != nil {
		err := b.readErr
		b.mu.Unlock()
		return fmt.Errorf("%s: connection closed: %w", method, err)
	}
	b.nextID++
	id := b.nextID
	ch := make(chan response, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	b.wmu.Lock()
	err = b.conn.WriteMessage(websocket.TextMessage, msg)
	b.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: connection closed", method)
		}
		if r.Type == "error" {
			return fmt.Errorf("%s: %s: %s", method, r.Error, r.Message)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Navigate loads url in the tab and returns once its load event fired.
func (b *Browser) Navigate(ctx context.Context, url string) error {
	return b.Call(ctx, "browsingContext.navigate", map[string]any{"context": b.Context, "url": url, "wait": "complete"}, nil)
}

// SetViewport sets the tab's viewport in CSS pixels.
func (b *Browser) SetViewport(ctx context.Context, width, height int) error {
	return b.Call(ctx, "browsingContext.setViewport", map[string]any{"context": b.Context,
		"viewport": map[string]int{"width": width, "height": height}}, nil)
}

// Eval evaluates the JavaScript expression js in the tab (awaiting a
// promise) and decodes its value, passed through JSON.stringify, into out.
func (b *Browser) Eval(ctx context.Context, js string, out any) error {
	var r struct {
		Type   string `json:"type"` // success, exception
		Result struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	expr := "(async () => JSON.stringify(await (" + js + ")) ?? 'null')()"
	if err := b.Call(ctx, "script.evaluate", map[string]any{"expression": expr, "target": map[string]string{"context": b.Context},
		"awaitPromise": true, "resultOwnership": "none"}, &r); err != nil {
		return err
	}
	if r.Type == "exception" {
		return fmt.Errorf("script.evaluate: %s", r.ExceptionDetails.Text)
	}
	if r.Result.Type != "string" {
		return fmt.Errorf("script.evaluate: a %s, not the JSON string asked for", r.Result.Type)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal([]byte(r.Result.Value), out)
}

// Screenshot returns the whole document as PNG.
func (b *Browser) Screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := b.Call(ctx, "browsingContext.captureScreenshot", map[string]any{"context": b.Context, "origin": "document"}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Keys presses and releases each key in turn (WebDriver key values:
// "\uE004" is Tab, "\uE007" Enter, " " Space) in the tab.
func (b *Browser) Keys(ctx context.Context, keys ...string) error {
	var acts []map[string]string
	for _, k := range keys {
		acts = append(acts, map[string]string{"type": "keyDown", "value": k}, map[string]string{"type": "keyUp", "value": k})
	}
	return b.Call(ctx, "input.performActions", map[string]any{"context": b.Context,
		"actions": []map[string]any{{"type": "key", "id": "keyboard", "actions": acts}}}, nil)
}

// Close ends the session and Firefox: browser.close, then, if Firefox is
// still running 10 s later, SIGKILL to its process group.
func (b *Browser) Close() {
	b.closeMu.Do(func() {
		if b.conn != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			b.Call(ctx, "browser.close", map[string]any{}, nil) // the connection may close before the answer
			cancel()
		}
		exited := make(chan struct{})
		go func() { b.cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			b.kill()
			<-exited
		}
		b.kill() // any content process left behind
		if b.conn != nil {
			b.conn.Close()
			<-b.done
		}
	})
}

// kill ends Firefox's process group.
func (b *Browser) kill() {
	if b.cmd.Process != nil {
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Stderr returns the last lines Firefox wrote to stderr.
func (b *Browser) Stderr() string { return b.stderr.String() }
