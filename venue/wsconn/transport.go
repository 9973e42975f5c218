package wsconn

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/fanoutd/fanoutd/internal/rawio"
)

// client dials venues as http.DefaultClient does, but its connections
// read with RawSyscall (rawio.ReadConn), and it keeps no idle
// connections: a venue link never reuses one, and a refused upgrade's
// would linger.
var client = &http.Client{Transport: transport()}

func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second} // DefaultTransport's
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawio.ReadConn(c), nil
	}
	t.DisableKeepAlives = true
	return t
}
