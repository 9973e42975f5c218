// Package venues is the one table of the venue adapters built into fanoutd:
// for each venue its name, constructors, default symbols and endpoint.
// Configuration, serve, record and replay all read it; the five are listed
// explicitly (no init-time registration).
package venues

import (
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues/binance"
	"github.com/fanoutd/fanoutd/venues/bybit"
	"github.com/fanoutd/fanoutd/venues/coinbase"
	"github.com/fanoutd/fanoutd/venues/kraken"
	"github.com/fanoutd/fanoutd/venues/okx"
)

// Venue is one venue adapter built into the binary.
type Venue struct {
	// Name is the venue's name in streams and configuration ("coinbase").
	Name string
	// New builds the live adapter.
	New func(venue.Config) (venue.Adapter, error)
	// NewDecoder builds the frame decoder that replay drives from captures.
	NewDecoder func(venue.Config) venue.Decoder
	// Symbols are subscribed at start when the configuration names none.
	Symbols []string
	// WSURL is the venue's public websocket endpoint, used when the
	// configuration sets no ws_url.
	WSURL string
}

// All lists the venues in the order the daemon starts them.
var All = []Venue{
	{"coinbase", adapt(coinbase.New), decoder(coinbase.NewDecoder), []string{"BTC-USD", "ETH-USD"}, coinbase.DefaultWSURL},
	{"kraken", adapt(kraken.New), decoder(kraken.NewDecoder), []string{"BTC/USD", "ETH/USD"}, kraken.DefaultWSURL},
	{"binance", adapt(binance.New), decoder(binance.NewDecoder), []string{"BTCUSDT", "ETHUSDT"}, binance.DefaultWSURL},
	{"okx", adapt(okx.New), decoder(okx.NewDecoder), []string{"BTC-USDT", "ETH-USDT"}, okx.DefaultWSURL},
	{"bybit", adapt(bybit.New), decoder(bybit.NewDecoder), []string{"BTCUSDT", "ETHUSDT"}, bybit.DefaultWSURL},
}

// Lookup returns the venue named name.
func Lookup(name string) (Venue, bool) {
	for _, v := range All {
		if v.Name == name {
			return v, true
		}
	}
	return Venue{}, false
}

// Names returns the venues' names in the order of All.
func Names() []string {
	out := make([]string, len(All))
	for i, v := range All {
		out[i] = v.Name
	}
	return out
}

func adapt[A venue.Adapter](newAdapter func(venue.Config) (A, error)) func(venue.Config) (venue.Adapter, error) {
	return func(c venue.Config) (venue.Adapter, error) {
		a, err := newAdapter(c)
		if err != nil {
			return nil, err
		}
		return a, nil
	}
}

func decoder[D venue.Decoder](newDecoder func(venue.Config) D) func(venue.Config) venue.Decoder {
	return func(c venue.Config) venue.Decoder { return newDecoder(c) }
}
