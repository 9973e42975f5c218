package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDrainCommand: drain POSTs the URL and exits 0 on 200, 1 on any
// other status or no answer, 2 on bad usage.
func TestDrainCommand(t *testing.T) {
	var posts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/forbidden" {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"code":"host_not_allowed"}`))
			return
		}
		posts++
		w.Write([]byte(`{"draining": true}`))
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/drainz"
	ln.Close()
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--wait", "0s", srv.URL + "/drainz"}, 0, ""},
		{[]string{"--wait", "0s", srv.URL + "/forbidden"}, 1, `403 Forbidden: {"code":"host_not_allowed"}`},
		{[]string{"--wait", "0s", closed}, 1, "connection refused"},
		{[]string{"a", "b"}, 2, "usage"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"drain"}, c.args...), &out, &errb); code != c.code || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("drain %v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.stderr)
		}
	}
	if posts != 1 {
		t.Errorf("%d POSTs, want 1", posts)
	}
}
