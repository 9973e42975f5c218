package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbe: exit 0 on 200, 1 on any other status or no answer, 2 on bad
// usage; the body of a failure is on stderr.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"ready": false}`))
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/healthz"
	ln.Close()
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{srv.URL + "/healthz"}, 0, ""},
		{[]string{srv.URL + "/readyz"}, 1, `503 Service Unavailable: {"ready": false}`},
		{[]string{closed}, 1, "connection refused"},
		{[]string{"a", "b"}, 2, "usage"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"probe"}, c.args...), &out, &errb); code != c.code || !strings.Contains(errb.String(), c.stderr) {
			t.Errorf("probe %v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.stderr)
		}
	}
}
