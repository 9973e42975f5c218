package wsapi

// decodeWire decodes b into w as encoding/json would, for the common
// shape of a command only: one object whose keys are among op, id,
// stream, token and streams, each once and spelled so, whose values are
// strings (streams a non-empty list of strings) of printable ASCII
// without escapes, with JSON whitespace between tokens. It returns false
// for anything else, and the caller decodes b with encoding/json, whose
// reflection and deep stack cost most of a connection's subscribe.
func decodeWire(b []byte, w *wireCommand) bool {
	p := wireScan{b: b}
	if !p.byte('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		if p.byte('}') {
			if first {
				return false // {} is decoded by encoding/json: nothing to gain
			}
			p.ws()
			return p.i == len(b)
		}
		if !first && !p.byte(',') {
			return false
		}
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return false
		}
		var bit uint8
		var dst **string
		switch string(key) {
		case "op":
			bit, dst = 1, &w.Op
		case "id":
			bit, dst = 2, &w.ID
		case "stream":
			bit, dst = 4, &w.Stream
		case "token":
			bit, dst = 8, &w.Token
		case "streams":
			bit = 16
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		if dst != nil {
			v, ok := p.str()
			if !ok {
				return false
			}
			s := string(v)
			*dst = &s
			continue
		}
		if !p.byte('[') {
			return false
		}
		var list []string
		for {
			v, ok := p.str()
			if !ok {
				return false
			}
			list = append(list, string(v))
			if p.byte(']') {
				break
			}
			if !p.byte(',') {
				return false
			}
		}
		w.Streams = &list
	}
}

// wireScan is decodeWire's position in its input.
type wireScan struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (p *wireScan) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c, after whitespace, if it is next.
func (p *wireScan) byte(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str consumes a string of printable ASCII other than a quote and a
// backslash, after whitespace, and returns its contents.
func (p *wireScan) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start : p.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}
