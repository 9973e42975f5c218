package wsapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The commands clients send take the fast path.
func TestDecodeWireTakesCommonCommands(t *testing.T) {
	for _, in := range []string{
		`{"op":"subscribe","id":"1","streams":["coinbase:level2:BTC-USD","kraken:trades:BTC/USD"]}`,
		`{"op":"unsubscribe","id":"2","streams":["coinbase:level2:BTC-USD"]}`,
		`{"op":"snapshot","id":"3","stream":"coinbase:level2:BTC-USD"}`,
		`{"op":"ping","id":"4"}`,
		` { "op" : "ping" ,
		"id":"4" } `,
		`{"op":"refresh","id":"5","token":"eyJ.x.y"}`,
	} {
		var w wireCommand
		if !decodeWire([]byte(in), &w) {
			t.Errorf("%s: not decoded by decodeWire", in)
		}
		sameAsJSON(t, []byte(in), w)
	}
}

// FuzzDecodeWire: what decodeWire decodes, encoding/json decodes to the
// same wireCommand.
func FuzzDecodeWire(f *testing.F) {
	for _, s := range []string{
		`{"op":"subscribe","id":"1","streams":["coinbase:level2:BTC-USD","kraken:trades:BTC/USD"]}`,
		`{"op":"ping","id":"4"}`, `{"op":"ping","id":"4"}x`, `{"op":"ping","op":"subscribe"}`, `{"OP":"ping"}`,
		`{"op":"ping","id":4}`, `{"op":null}`, `{}`, `{"streams":[]}`, `{"streams":["a",]}`, `{"op":"p\u0069ng"}`,
		`{"op":"ping",}`, `{"id":"\u00e9"}`, "{\"id\":\"\xff\"}", `{"op":"recover","stream":"s","from":12}`, `{"stream":"a"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var w wireCommand
		if decodeWire(b, &w) {
			sameAsJSON(t, b, w)
		}
	})
}

func sameAsJSON(t *testing.T, b []byte, got wireCommand) {
	t.Helper()
	var want wireCommand
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%q: decodeWire decoded what encoding/json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decodeWire %s, encoding/json %s", b, show(got), show(want))
	}
}

func show(w wireCommand) string {
	b, _ := json.Marshal(w)
	return string(b)
}

// BenchmarkParseSubscribe: a connection's subscribe command, as clients
// send it.
func BenchmarkParseSubscribe(b *testing.B) {
	in := []byte(`{"op":"subscribe","id":"b","streams":["coinbase:trades:BTC-USD"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCommand(in); err != nil {
			b.Fatal(err)
		}
	}
}
