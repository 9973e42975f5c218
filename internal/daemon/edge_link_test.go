package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/fanoutd/fanoutd/internal/cluster/natstest"
	"github.com/fanoutd/fanoutd/internal/daemon"
	"github.com/fanoutd/fanoutd/internal/daemon/daemontest"
	"github.com/fanoutd/fanoutd/venue"
	"github.com/fanoutd/fanoutd/venues"
)

func coverageLink(t *testing.T, base string) string {
	t.Helper()
	r, err := http.Get(base + "/v1/coverage")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var cov []struct {
		Venue string `json:"venue"`
		Link  string `json:"link"`
	}
	json.NewDecoder(r.Body).Decode(&cov)
	for _, c := range cov {
		if c.Venue == "coinbase" {
			return c.Link
		}
	}
	return ""
}

func readyStatus(t *testing.T, base string) int {
	t.Helper()
	r, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// TestEdgeLinkFollowsVenue: an edge's coverage shows the venue down when
// the ingest's link to it is down (the bus being up), and its /readyz is
// not ready when no venue it serves is up; both come back with the link.
func TestEdgeLinkFollowsVenue(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	ns := natstest.Run(t)
	src := &source{}
	in := daemontest.Start(t, "cluster:\n  role: ingest\n  node: in-1\n  nats_url: "+ns.ClientURL()+"\nvenues:\n  coinbase:\n    symbols: [BTC-USD]\n",
		daemon.Options{Venues: []venues.Venue{src.adapter()}})
	waitFor(t, 10*time.Second, "in-1 to lead", func() bool { l, _ := coverageLeader(t, in.URL("http")); return l == "in-1" })
	edge := daemontest.Start(t, fmt.Sprintf(edgeOnlyYAML, ns.ClientURL()), daemon.Options{})
	waitReady(t, edge)
	if l := coverageLink(t, edge.URL("http")); l != "up" {
		t.Fatalf("edge coverage link %q with the venue up", l)
	}
	src.mu.Lock()
	s := src.src
	src.mu.Unlock()
	s.SetLink(venue.LinkDown)
	waitFor(t, 10*time.Second, "the edge to show the venue down", func() bool {
		return coverageLink(t, edge.URL("http")) == "down" && readyStatus(t, edge.URL("http")) == http.StatusServiceUnavailable
	})
	s.SetLink(venue.LinkUp)
	waitFor(t, 10*time.Second, "the edge to show the venue up", func() bool {
		return coverageLink(t, edge.URL("http")) == "up" && readyStatus(t, edge.URL("http")) == http.StatusOK
	})
}
