package claimchecktest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/claimcheck/claimchecktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

func TestFaultProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	p := claimchecktest.NewFaultProxy(t, backend.URL)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (int, string) {
		resp, err := c.Get(p.URL + "/bucket/key")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 200 || body != "ok" {
		t.Fatalf("pass: %d %q", code, body)
	}
	p.Throttle(0.001, 1)
	if code, _ := get(); code != 200 {
		t.Fatalf("burst: %d", code)
	}
	if code, body := get(); code != 503 || !strings.Contains(body, "<Code>SlowDown</Code>") {
		t.Fatalf("throttle: %d %q", code, body)
	}
	p.Set(claimchecktest.FaultForbidden)
	if code, body := get(); code != 403 || !strings.Contains(body, "AccessDenied") {
		t.Fatalf("forbidden: %d %q", code, body)
	}
	p.Set(claimchecktest.FaultReset)
	if code, _ := get(); code != 0 {
		t.Fatalf("reset: %d", code)
	}
	if n := p.Count("GET", "/bucket/key", "*"); n != 5 {
		t.Fatalf("counted %d requests, want 5", n)
	}
}
