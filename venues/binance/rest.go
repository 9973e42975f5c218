package binance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// restMaxBody bounds a REST response read into memory: a 5000-level depth
// snapshot is about 400 KB, exchangeInfo for every symbol a few MB.
const restMaxBody = 32 << 20

// Request weights (Binance REST docs, /api/v3/depth and /api/v3/exchangeInfo)
// and the budget fanoutd spends of the IP's REQUEST_WEIGHT of 6000 per
// minute: half, leaving room for other clients on the same address (whose
// spend each answer's X-MBX-USED-WEIGHT-1M shows).
const (
	weightBudget       = 3000.0 // per weightWindow, and the bucket's size
	weightWindow       = time.Minute
	weightExchangeInfo = 20
	// banWait is how long a 418 without Retry-After stops every request
	// (Binance bans for 2 minutes to 3 days).
	banWait = 2 * time.Minute
)

// depthWeight returns the weight of /api/v3/depth for a limit.
func depthWeight(limit int) float64 {
	switch {
	case limit <= 100:
		return 5
	case limit <= 500:
		return 25
	case limit <= 1000:
		return 50
	}
	return 250
}

// APIError is an error body Binance's REST API returned, such as
// {"code":-1121,"msg":"Invalid symbol."}, with the HTTP status.
type APIError struct {
	Status     int
	Code       int64
	Msg        string
	RetryAfter time.Duration // from Retry-After on 429 and 418
}

func (e *APIError) Error() string {
	return fmt.Sprintf("binance: REST %d: code %d: %s", e.Status, e.Code, e.Msg)
}

// InvalidSymbol reports whether the venue said the symbol does not exist.
func (e *APIError) InvalidSymbol() bool { return e.Code == codeInvalidSymbol }

// RateLimited reports whether the venue limited the request rate (429) or
// banned the address for a while (418).
func (e *APIError) RateLimited() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusTeapot
}

const codeInvalidSymbol = -1121

// rest is the REST half of the adapter: the depth snapshot and
// exchangeInfo, under a weight bucket (budget per window, refilled
// evenly), drained further by the IP's own count (X-MBX-USED-WEIGHT-1M:
// other clients on the address spend from the same limit) and stopped
// whole while a 429 or 418's Retry-After runs. Safe for concurrent use.
type rest struct {
	base   string
	client *http.Client
	budget float64       // weight per window
	window time.Duration // the budget's window

	mu     sync.Mutex // protects the fields below
	tokens float64
	filled time.Time
	until  time.Time // no request before (Retry-After)
	// The address's current window as the last answer reported it: the
	// weight left of the address's limit (twice the budget) until winEnd.
	winEnd  time.Time
	winLeft float64
}

func newREST(base string) *rest {
	return &rest{
		base:   strings.TrimRight(base, "/"),
		client: &http.Client{Timeout: 30 * time.Second},
		budget: weightBudget,
		window: weightWindow,
		tokens: weightBudget,
		filled: time.Now(),
	}
}

// setBudget changes the bucket: budget weight per window, full now.
func (r *rest) setBudget(budget float64, window time.Duration) {
	r.mu.Lock()
	r.budget, r.window, r.tokens, r.filled = budget, window, budget, time.Now()
	r.mu.Unlock()
}

// spend takes weight from the bucket, waiting for it to refill (and for
// a Retry-After to pass) if needed. It returns ctx.Err() if ctx ends
// first, leaving the bucket unchanged.
func (r *rest) spend(ctx context.Context, weight float64) error {
	for {
		r.mu.Lock()
		now := time.Now()
		r.tokens = min(r.budget, r.tokens+float64(now.Sub(r.filled))/float64(r.window)*r.budget)
		r.filled = now
		var wait time.Duration
		inWin := now.Before(r.winEnd)
		switch {
		case now.Before(r.until):
			wait = r.until.Sub(now)
		case inWin && r.winLeft < weight:
			wait = r.winEnd.Sub(now)
		case r.tokens >= weight:
			r.tokens -= weight
			if inWin {
				r.winLeft -= weight
			}
			r.mu.Unlock()
			return nil
		default:
			wait = time.Duration((weight - r.tokens) / r.budget * float64(r.window))
		}
		r.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// observe takes what a response says of the address's limit: the weight
// every client of the address used in the current window (the window
// ends on the minute; what is left of the limit, twice the budget, bounds
// the requests until then), and a 429 or 418's Retry-After, which stops
// every request until it passes.
func (r *rest) observe(resp *http.Response, ae *APIError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if used, err := strconv.ParseFloat(resp.Header.Get("X-MBX-USED-WEIGHT-1M"), 64); err == nil && used >= 0 {
		now := time.Now()
		r.winEnd = now.Truncate(r.window).Add(r.window)
		r.winLeft = 2*r.budget - used
	}
	if ae == nil || !ae.RateLimited() {
		return
	}
	wait := ae.RetryAfter
	if wait <= 0 {
		wait = time.Second
		if ae.Status == http.StatusTeapot {
			wait = banWait
		}
		ae.RetryAfter = wait
	}
	if until := time.Now().Add(wait); until.After(r.until) {
		r.until = until
	}
}

// get fetches path?query and returns the body of a 200, or an *APIError.
func (r *rest) get(ctx context.Context, weight float64, path string, q url.Values) ([]byte, error) {
	if err := r.spend(ctx, weight); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, restMaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > restMaxBody {
		return nil, fmt.Errorf("binance: REST %s: body over %d bytes", path, restMaxBody)
	}
	if resp.StatusCode == http.StatusOK {
		r.observe(resp, nil)
		return body, nil
	}
	ae := &APIError{Status: resp.StatusCode}
	var eb struct {
		Code int64  `json:"code"`
		Msg  string `json:"msg"`
	}
	if json.Unmarshal(body, &eb) == nil {
		ae.Code, ae.Msg = eb.Code, eb.Msg
	} else {
		ae.Msg = http.StatusText(resp.StatusCode)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		ae.RetryAfter = time.Duration(s) * time.Second
	}
	r.observe(resp, ae)
	return nil, ae
}

// depth fetches /api/v3/depth for symbol (as Binance writes it).
func (r *rest) depth(ctx context.Context, symbol string, limit int) ([]byte, error) {
	q := url.Values{"symbol": {symbol}, "limit": {strconv.Itoa(limit)}}
	return r.get(ctx, depthWeight(limit), "/api/v3/depth", q)
}

// symbols asks exchangeInfo about symbols and returns those it knows, with
// their trading status. An unknown symbol makes Binance refuse the whole
// request with -1121; then each symbol is asked about alone, so the unknown
// ones are named.
func (r *rest) symbols(ctx context.Context, symbols []string) (known map[string]string, err error) {
	known = map[string]string{}
	body, err := r.exchangeInfo(ctx, symbols)
	var ae *APIError
	if errors.As(err, &ae) && ae.InvalidSymbol() && len(symbols) > 1 {
		for _, s := range symbols {
			body, err := r.exchangeInfo(ctx, []string{s})
			if errors.As(err, &ae) && ae.InvalidSymbol() {
				continue
			}
			if err != nil {
				return nil, err
			}
			if err := parseExchangeInfo(body, known); err != nil {
				return nil, err
			}
		}
		return known, nil
	}
	if errors.As(err, &ae) && ae.InvalidSymbol() {
		return known, nil
	}
	if err != nil {
		return nil, err
	}
	return known, parseExchangeInfo(body, known)
}

func (r *rest) exchangeInfo(ctx context.Context, symbols []string) ([]byte, error) {
	q := url.Values{}
	switch len(symbols) {
	case 0: // every symbol
	case 1:
		q.Set("symbol", symbols[0])
	default:
		b, _ := json.Marshal(symbols)
		q.Set("symbols", string(b))
	}
	return r.get(ctx, weightExchangeInfo, "/api/v3/exchangeInfo", q)
}

func parseExchangeInfo(body []byte, into map[string]string) error {
	var ei struct {
		Symbols []struct {
			Symbol string `json:"symbol"`
			Status string `json:"status"`
		} `json:"symbols"`
	}
	if err := json.Unmarshal(body, &ei); err != nil {
		return fmt.Errorf("binance: exchangeInfo: %w", err)
	}
	for _, s := range ei.Symbols {
		into[s.Symbol] = s.Status
	}
	return nil
}
