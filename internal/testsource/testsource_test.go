package testsource

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venue/venuetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPublishReachesSinkAndCoverage(t *testing.T) {
	sink := venuetest.NewSink()
	s := New("coinbase", venue.Config{Sink: sink, Symbols: []string{"BTC-USD"}})
	s.Start(context.Background())
	s.Publish(&venue.Event{Kind: venue.KindTrade, Stream: "coinbase:trades:BTC-USD"})
	s.Subscribe("ETH-USD", "BTC-USD")
	if got := s.Symbols(); len(got) != 2 || got[1] != "ETH-USD" {
		t.Fatalf("symbols %v", got)
	}
	cov := s.Coverage()
	if cov.Link != "up" || len(cov.Streams) != 1 || cov.Streams[0].Events != 1 {
		t.Fatalf("coverage %+v", cov)
	}
	s.Notice(notice.Must(notice.LinkUp, "coinbase", "", cov.Since, "up", nil))
	s.Stop(context.Background())
	if s.Coverage().Link != "down" {
		t.Fatal("link not down after Stop")
	}
}
