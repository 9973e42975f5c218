package claimchecktest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what a FaultProxy does to the requests it receives.
type Fault uint8

// The faults.
const (
	FaultNone      Fault = iota // pass every request through
	FaultThrottle               // pass at most Rate requests/s, answer the rest 503 SlowDown
	FaultHang                   // never answer until the client gives up or the fault changes
	FaultForbidden              // answer 403 AccessDenied
	FaultReset                  // reset the connection without an answer
)

// Request is one request a FaultProxy saw.
type Request struct {
	Method string
	Path   string
	Range  string
	Status int // 0 for hang and reset
}

// FaultProxy is an HTTP reverse proxy on 127.0.0.1 in front of an S3
// endpoint that injects faults and records every request. SigV4 signs
// the Host header, which the proxy passes through unchanged, so clients
// sign for the proxy's address.
type FaultProxy struct {
	URL string
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu      sync.Mutex // protects the fields below
	fault   Fault
	rate    float64 // FaultThrottle: tokens per second
	burst   float64
	tokens  float64
	last    time.Time
	delay   time.Duration   // added before every passed request
	release chan struct{}   // closed to free hanging requests
	hang    map[string]bool // paths that hang whatever the fault (HangPaths)
	log     []Request
}

// NewFaultProxy starts a proxy to target (an http:// URL); the test's
// cleanup stops it.
func NewFaultProxy(t testing.TB, target string) *FaultProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{release: make(chan struct{})}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host // keep the signed Host
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0},
		ErrorLog:  nil,
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(p.Close)
	return p
}

// Close frees hanging requests and stops the proxy.
func (p *FaultProxy) Close() {
	p.Set(FaultNone)
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
}

// Set switches the fault; it frees requests hanging under FaultHang.
func (p *FaultProxy) Set(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault == FaultHang && f != FaultHang {
		close(p.release)
		p.release = make(chan struct{})
	}
	p.fault = f
}

// HangPaths makes the requests of these paths wait until Release, then
// pass them.
func (p *FaultProxy) HangPaths(paths ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hang == nil {
		p.hang = map[string]bool{}
	}
	for _, path := range paths {
		p.hang[path] = true
	}
}

// Release frees the requests hanging on HangPaths and passes those paths
// again.
func (p *FaultProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang = nil
	if p.fault != FaultHang {
		close(p.release)
		p.release = make(chan struct{})
	}
}

// Throttle passes at most rate requests/s (with a burst of burst) and
// answers the rest 503 SlowDown at once.
func (p *FaultProxy) Throttle(rate float64, burst int) {
	p.Set(FaultThrottle)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.burst, p.tokens, p.last = rate, float64(burst), float64(burst), time.Now()
}

// Delay holds every passed request d before forwarding it.
func (p *FaultProxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Requests returns the requests seen so far.
func (p *FaultProxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...)
}

// Count returns how many requests with method whose path ends in
// pathSuffix (and whose Range header is rng, unless rng is "*") were seen.
func (p *FaultProxy) Count(method, pathSuffix, rng string) int {
	n := 0
	for _, r := range p.Requests() {
		if r.Method == method && strings.HasSuffix(r.Path, pathSuffix) && (rng == "*" || r.Range == rng) {
			n++
		}
	}
	return n
}

// Reset forgets the recorded requests.
func (p *FaultProxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(c int) {
	if s.status == 0 {
		s.status = c
	}
	s.ResponseWriter.WriteHeader(c)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = 200
	}
	return s.ResponseWriter.Write(b)
}

const (
	slowDownXML  = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>`
	forbiddenXML = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied (secret detail)</Message><RequestId>fault</RequestId></Error>`
)

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	fault, release, delay := p.fault, p.release, p.delay
	held := p.hang[r.URL.Path]
	if fault == FaultThrottle {
		now := time.Now()
		p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
		p.last = now
		if p.tokens >= 1 {
			p.tokens--
			fault = FaultNone
		}
	}
	i := len(p.log)
	p.log = append(p.log, Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range")})
	p.mu.Unlock()
	record := func(status int) {
		p.mu.Lock()
		p.log[i].Status = status
		p.mu.Unlock()
	}
	if held { // HangPaths: wait for Release, then pass the request
		select {
		case <-r.Context().Done():
			return
		case <-release:
		}
		fault = FaultNone
	}
	switch fault {
	case FaultThrottle:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(slowDownXML))
		record(503)
	case FaultForbidden:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(forbiddenXML))
		record(403)
	case FaultHang:
		select {
		case <-r.Context().Done():
		case <-release:
		}
	case FaultReset:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("claimchecktest: cannot hijack")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
	default:
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		sr := &statusRecorder{ResponseWriter: w}
		p.rp.ServeHTTP(sr, r)
		record(sr.status)
	}
}
