package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/venue"
)

// wantTimeout bounds an edge's question to the ingest: the subscribing
// client waits for it.
const wantTimeout = 2 * time.Second

// MaxWantAdds is how many symbols the ingest does not hold yet one want
// message may add: a request names one stream, and a renewal re-adds
// what an ingest that restarted lost at this pace per edge and second;
// past it a stream is refused (too_many_symbols), counted and logged.
const MaxWantAdds = 16

// Want is the body of a message on P.want.<venue>: a request (with a
// reply subject) names the one stream a subscriber of the edge asks for;
// a renewal (no reply subject) names every stream of the venue the edge's
// subscribers hold.
type Want struct {
	Node    string   `json:"node"`
	Streams []string `json:"streams"`
}

// ErrNotAsked is Edge.Want's error when it did not ask: the venue's link
// to the ingest is down, or the edge is not started.
var ErrNotAsked = errors.New("cluster: the ingest was not asked (no link)")

// answerWant applies a want: each stream goes to OnWant (which validates
// it as a local subscribe would and subscribes its symbol at the venue).
// A request is answered by the venue's leader only: no header and no body
// if accepted, else Fanoutd-Error: <code> and the message as the body. A
// standby applies it silently, to have the symbol if it takes over.
func (in *Ingest) answerWant(m *nats.Msg) {
	v := strings.TrimPrefix(m.Subject, in.subj.Prefix+".want.")
	p := in.pubs[v]
	if p == nil || in.OnWant == nil {
		return // another ingest serves the venue
	}
	var w Want
	if err := json.Unmarshal(m.Data, &w); err != nil {
		in.log.Warn("nats: bad want", "venue", v, "err", err)
		return
	}
	var code, msg string
	added := 0
	for _, s := range w.Streams {
		st, err := venue.ParseStream(s)
		switch {
		case err != nil:
			code, msg = "bad_request", err.Error()
		case st.Venue() != v:
			code, msg = "unknown_stream", "not a stream of "+v
		case in.Holds != nil && !in.Holds(st) && added >= MaxWantAdds:
			code, msg = "too_many_symbols", fmt.Sprintf("one want adds at most %d symbols", MaxWantAdds)
			in.wantCapped.reject(v, "too_many_new", "stream", s, "node", w.Node)
		default:
			if in.Holds != nil && !in.Holds(st) {
				added++
			}
			code, msg = in.OnWant(st)
		}
		if code != "" && m.Reply == "" {
			in.log.Debug("ingest: a renewed want refused", "stream", s, "node", w.Node, "code", code, "msg", msg)
		}
	}
	if m.Reply == "" || !p.lead.Load() {
		return
	}
	reply := &nats.Msg{Header: nats.Header{}}
	if code != "" {
		reply.Header.Set(HeaderError, code)
		reply.Data = []byte(msg)
	}
	m.RespondMsg(reply)
}

// Want asks the ingest leading st's venue for st, as a subscriber of the
// edge asks for it: code and msg are the ingest's refusal ("" if it
// accepted). It does not ask (nil error, "" code) when the edge already
// follows st; err is ErrNotAsked when the venue's link to the ingest is
// down, or the request's error (no responders, timeout): the caller then
// accepts, and the renewals ask again once an ingest hears them.
func (e *Edge) Want(st venue.Stream) (code, msg string, err error) {
	e.mu.Lock()
	nc, following, v := e.nc, e.streams[st] != nil, e.venues[st.Venue()]
	e.mu.Unlock()
	if following {
		return "", "", nil
	}
	if nc == nil || v == nil || !v.linked() {
		return "", "", ErrNotAsked
	}
	b, _ := json.Marshal(Want{Node: e.node, Streams: []string{string(st)}})
	r, err := nc.RequestMsg(&nats.Msg{Subject: e.subj.Want(st.Venue()), Data: b}, wantTimeout)
	if err != nil {
		return "", "", err
	}
	return r.Header.Get(HeaderError), string(r.Data), nil
}

// renew publishes, per venue, the streams the edge follows (its
// subscribers hold), so that the ingest keeps their symbols subscribed.
func (e *Edge) renew() {
	e.mu.Lock()
	nc := e.nc
	byVenue := map[string][]string{}
	for st := range e.streams {
		byVenue[st.Venue()] = append(byVenue[st.Venue()], string(st))
	}
	e.mu.Unlock()
	if nc == nil || !nc.IsConnected() {
		return
	}
	for name, streams := range byVenue {
		b, _ := json.Marshal(Want{Node: e.node, Streams: streams})
		if err := nc.Publish(e.subj.Want(name), b); err != nil {
			e.log.Warn("nats: want renewal failed", "venue", name, "err", err)
		}
	}
}

// WantsCapped calls f, per venue, with the streams want messages named
// that were refused past MaxWantAdds.
func (in *Ingest) WantsCapped(f func(venueName string, n uint64)) {
	in.wantCapped.each(func(v, _ string, n uint64) { f(v, n) })
}

// linked reports whether the venue's link to the ingest is up.
func (v *edgeVenue) linked() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.up
}
