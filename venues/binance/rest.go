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
// minute: half, leaving room for other clients on the same address.
const (
	weightBudget       = 3000.0 // per minute, and the bucket's size
	weightExchangeInfo = 20
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
// exchangeInfo, under a weight bucket. Safe for concurrent use.
type rest struct {
	base   string
	client *http.Client

	mu     sync.Mutex // protects tokens and filled
	tokens float64
	filled time.Time
}

func newREST(base string) *rest {
	return &rest{
		base:   strings.TrimRight(base, "/"),
		client: &http.Client{Timeout: 30 * time.Second},
		tokens: weightBudget,
		filled: time.Now(),
	}
}

// spend takes weight from the bucket, waiting for it to refill if needed.
// It returns ctx.Err() if ctx ends first, leaving the bucket unchanged.
func (r *rest) spend(ctx context.Context, weight float64) error {
	for {
		r.mu.Lock()
		now := time.Now()
		r.tokens = min(weightBudget, r.tokens+now.Sub(r.filled).Minutes()*weightBudget)
		r.filled = now
		if r.tokens >= weight {
			r.tokens -= weight
			r.mu.Unlock()
			return nil
		}
		wait := time.Duration((weight - r.tokens) / weightBudget * float64(time.Minute))
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
