// Package deploy_test checks deploy/: the alerting rules with promtool, and
// the rules and the Grafana dashboard against a real Prometheus scraping a
// live daemon. Each test skips when Prometheus is not installed
// (apt-get install prometheus).
package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.yaml.in/yaml/v3"

	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/internal/testutil"
	"github.com/fanoutd/fanoutd/venue/venuetest"
	"github.com/fanoutd/fanoutd/venues"
	"github.com/fanoutd/fanoutd/venues/coinbase/coinbasetest"
)

func need(t *testing.T, bin string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Skipf("%s is not installed (apt-get install prometheus): skipped", bin)
	}
	return p
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(need(t, "promtool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

// TestRulesPromtool: the rules are valid, every alert's unit cases pass,
// and the example configuration is valid.
func TestRulesPromtool(t *testing.T) {
	promtool(t, "check", "rules", "prometheus/fanoutd.rules.yml")
	promtool(t, "test", "rules", "prometheus/fanoutd.rules.test.yml")
	promtool(t, "check", "config", "prometheus/prometheus.yml")
	// Every alert has a unit case.
	rules := alerts(t)
	b, err := os.ReadFile("prometheus/fanoutd.rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if !strings.Contains(string(b), "alertname: "+r.Alert+"\n") {
			t.Errorf("%s has no unit case in fanoutd.rules.test.yml", r.Alert)
		}
		if r.Annotations["runbook"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("%s: no summary or runbook", r.Alert)
		}
	}
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Annotations map[string]string `yaml:"annotations"`
}

func alerts(t *testing.T) []rule {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile("prometheus/fanoutd.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// dashboardExprs returns every panel target's expression of the dashboard.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("grafana/fanoutd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i+1)] = tg.Expr
		}
	}
	if len(out) < 20 {
		t.Fatalf("the dashboard has %d expressions", len(out))
	}
	return out
}

// prom is a Prometheus server started for one test.
type prom struct{ base string }

func startPrometheus(t *testing.T, target string, rules []byte) *prom {
	t.Helper()
	bin := need(t, "prometheus")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yml]\nscrape_configs:\n  - job_name: fanoutd\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	p := &prom{base: "http://" + addr}
	waitFor(t, 30*time.Second, "prometheus never became ready", func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

type series struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// query evaluates expr now; a bad expression fails t.
func (p *prom) query(t *testing.T, expr string) []series {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []series `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", expr, r.Error)
	}
	return r.Data.Result
}

// waitFor is testutil.WaitFor, the one polling helper of the tests.
var waitFor = testutil.WaitFor

var metricName = regexp.MustCompile(`\b(?:fanoutd|process|go)_[a-z0-9_]+\b`)

// TestDashboardAndRulesAgainstPrometheus: a real Prometheus scrapes a live
// daemon (a mock Coinbase behind a proxy, recording on, one subscriber
// reading a level2 stream). Every dashboard expression returns data; every
// metric an alert names has series (no misspelt metric); then the proxy is
// killed and FanoutdVenueLinkDown fires, from a test copy of the rules
// whose `for:` is 2s instead of 30s (the unit cases check the 30 s).
func TestDashboardAndRulesAgainstPrometheus(t *testing.T) {
	need(t, "prometheus")
	mock := &coinbasetest.Mock{}
	mock.Start(t)
	px := venuetest.NewProxy(t, strings.TrimPrefix(mock.Server().URL, "ws://"))
	cb, _ := venues.Lookup("coinbase")
	d := daemontest.Start(t, fmt.Sprintf("venues:\n  coinbase:\n    ws_url: ws://%s\n    symbols: [%s]\nrecord:\n  enabled: true\n  dir: %s\n",
		px.Addr, mock.Symbol(), t.TempDir()), daemon.Options{Venues: []venues.Venue{cb}})

	ws, _, err := websocket.DefaultDialer.Dial(d.URL("ws")+"/v1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"op": "subscribe", "id": "1", "streams": []string{"coinbase:level2:" + mock.Symbol()}})
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the venue's book moves
		defer wg.Done()
		for ctx.Err() == nil {
			mock.Step(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stop(); wg.Wait() }()
	// A claim read, so the claim reader's metrics have moved.
	http.Get(d.URL("http") + "/v1/snapshots/coinbase/" + mock.Symbol() + "/latest")

	rules, err := os.ReadFile("prometheus/fanoutd.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	fast := strings.Replace(string(rules), "expr: fanoutd_venue_link_up == 0\n        for: 30s", "expr: fanoutd_venue_link_up == 0\n        for: 2s", 1)
	if fast == string(rules) {
		t.Fatal("the link-down rule is not written as the test expects")
	}
	p := startPrometheus(t, d.Addr, []byte(fast))
	waitFor(t, 30*time.Second, "prometheus never scraped the daemon", func() bool {
		r := p.query(t, `up{job="fanoutd"} == 1`)
		return len(r) == 1
	})
	sub := strings.NewReplacer("$__rate_interval", "5s", "$job", ".*", "$instance", ".*")
	exprs := dashboardExprs(t)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range exprs {
			if !yield(k) {
				return
			}
		}
	})
	// rate() has data once two scrapes fall in its window: wait for every
	// panel's data (a fixed 6 s was a few scrapes only on a quiet machine).
	var empty []string
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		empty = empty[:0]
		for _, k := range keys {
			if len(p.query(t, sub.Replace(exprs[k]))) == 0 {
				empty = append(empty, k)
			}
		}
		if len(empty) == 0 || time.Since(start) > 60*time.Second {
			break
		}
	}
	for _, k := range empty {
		t.Errorf("dashboard %q: no data for %s in 60s", k, sub.Replace(exprs[k]))
	}
	for _, r := range alerts(t) {
		p.query(t, r.Expr) // parses and runs
		for _, name := range metricName.FindAllString(r.Expr, -1) {
			if len(p.query(t, fmt.Sprintf("count({__name__=%q})", name))) == 0 {
				t.Errorf("alert %s: no series of %s", r.Alert, name)
			}
		}
	}
	if len(p.query(t, `ALERTS{alertname="FanoutdVenueLinkDown"}`)) != 0 {
		t.Fatal("FanoutdVenueLinkDown is active while the venue is up")
	}

	px.Kill()
	killed := time.Now()
	waitFor(t, 30*time.Second, "FanoutdVenueLinkDown never fired after the venue was killed", func() bool {
		r := p.query(t, `ALERTS{alertname="FanoutdVenueLinkDown",alertstate="firing",venue="coinbase"}`)
		return len(r) == 1
	})
	t.Logf("FanoutdVenueLinkDown firing %v after the venue was killed (rule for: 2s in this test's copy)", time.Since(killed).Round(time.Millisecond))
}
