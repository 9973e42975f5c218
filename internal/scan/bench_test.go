package scan

import "testing"

// BenchmarkWalk reads a Bybit-shaped delta the way a decoder does: the
// envelope's keys, two levels of two strings each, integers, and skips.
func BenchmarkWalk(b *testing.B) {
	frame := []byte(`{"topic":"orderbook.50.BTCUSDT","ts":1680652808085,"type":"delta","data":{"s":"BTCUSDT","b":[["28161.04","0.177474"],["28145.71","0"]],"a":[["28184.33","0"]],"u":59438061,"seq":4281282232},"cts":1680652808083}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var s Scanner
	for b.Loop() {
		s.Reset(frame)
		n := 0
		for more := s.Object(); more; more = s.More('}') {
			switch string(s.Key()) {
			case "topic", "type":
				n += len(s.Str())
			case "data":
				for more := s.Object(); more; more = s.More('}') {
					switch string(s.Key()) {
					case "b", "a":
						for more := s.Array(); more; more = s.More(']') {
							s.Expect('[')
							n += len(s.Str())
							s.Expect(',')
							n += len(s.Str())
							s.Expect(']')
						}
					case "u":
						n += int(s.IntOrString())
					default:
						s.Skip()
					}
				}
			default:
				s.Skip()
			}
		}
		if !s.End() || n == 0 {
			b.Fatal("walk failed")
		}
	}
}

// BenchmarkSkip skips a whole frame.
func BenchmarkSkip(b *testing.B) {
	frame := []byte(`{"channel":"l2_data","client_id":"","timestamp":"2026-09-07T01:57:58.894355Z","sequence_num":3,"events":[{"type":"update","product_id":"BTC-USD","updates":[{"side":"bid","event_time":"2026-09-07T01:57:58.894355Z","price_level":"50000.1","new_quantity":"0"},{"side":"offer","event_time":"2026-09-07T01:57:58.894355Z","price_level":"50001.17","new_quantity":"1.25"}]}]}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var s Scanner
	for b.Loop() {
		s.Reset(frame)
		if s.Skip(); !s.End() {
			b.Fatal("skip failed")
		}
	}
}

func BenchmarkFixed(b *testing.B) {
	in := [][]byte{[]byte("28161.04"), []byte("0.177474"), []byte("9705.60000000"), []byte("0")}
	b.ReportAllocs()
	for b.Loop() {
		for _, x := range in {
			if _, _, _, st := split(x); st != OK {
				b.Fatal(st)
			}
		}
	}
}
