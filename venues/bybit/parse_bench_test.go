package bybit

import (
	"testing"

	"github.com/fanoutd/fanoutd/internal/scan"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

type venueConfig = venue.Config

type nopSink struct{}

func (nopSink) Event(*venue.Event)   {}
func (nopSink) Notice(notice.Notice) {}

// BenchmarkParseOnly scans a typical delta frame's envelope and data
// without applying it, for comparison with BenchmarkDecodeLevel2.
func BenchmarkParseOnly(b *testing.B) {
	frame := []byte(`{"topic":"orderbook.50.BTCUSDT","ts":1680652808085,"type":"delta","data":{"s":"BTCUSDT","b":[["28161.04","0.177474"],["28145.71","0"]],"a":[["28184.33","0"]],"u":59438061,"seq":4281282232},"cts":1680652808083}`)
	d := NewDecoder(testConfig())
	t := d.lookup([]byte("orderbook.50.BTCUSDT"))
	var s scan.Scanner
	b.ReportAllocs()
	for b.Loop() {
		s.Reset(frame)
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "data":
				d.parseData(&s, t, []byte("delta"))
			case "topic", "type":
				s.Str()
			default:
				s.Skip()
			}
		}
	}
}

func testConfig() venueConfig { return venueConfig{Sink: nopSink{}, Depth: 50} }
