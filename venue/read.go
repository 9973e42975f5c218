package venue

import "io"

// ReadFrame reads r (one websocket message's reader) to its end into
// buf[:0], reusing buf's memory, and returns the frame. Adapters keep one
// buffer per link: neither the decoder nor the recorder keeps a frame.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow as append does
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
