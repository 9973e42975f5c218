package cluster

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fanoutd/fanoutd/fanout"
	"github.com/fanoutd/fanoutd/notice"
	"github.com/fanoutd/fanoutd/venue"
)

// Ingest is an ingest node's side of the bus: it publishes its feeds'
// events (through each feed's Tap), their venues' notices, a heartbeat per
// venue every second, and answers book requests. Build one with NewIngest
// before the feeds (their Options.Tap is Ingest.Tap), then Start it with
// the connection before the venues start.
type Ingest struct {
	subj     Subjects
	node     string
	instance string // node and a random suffix: this process, in the leases
	epoch    string // this process's own epoch (a venue taken over keeps its leader's)
	log      *slog.Logger

	leaseErrs int // the lease loop's: failed attempts to bind the bucket

	// KVReplicas is the lease bucket's replica count (cluster.kv_replicas;
	// 0: auto, see ensureBucket). Set it before Start.
	KVReplicas int

	// OnWant, if set, decides a stream an edge asks for or renews
	// (P.want.<venue>) exactly as a local subscribe is decided, subscribes
	// its symbol at the venue if new, and records that an edge wants it
	// now. It returns the refusal's code and message ("" to accept). Set
	// it before Start; it is called from NATS's goroutine.
	OnWant func(st venue.Stream) (code, msg string)
	// Link, if set, returns the venue's link state (venue.LinkState's
	// string): each heartbeat carries it, so that an edge's coverage and
	// readiness reflect the venue behind the ingest. Set it before Start.
	Link func(venueName string) string
	// Holds, if set, reports whether st's symbol is subscribed at the
	// venue already: one want message adds at most MaxWantAdds symbols
	// that are not. Set it before Start.
	Holds func(st venue.Stream) bool

	wantCapped burstCounter // streams refused past MaxWantAdds

	nc    *nats.Conn              // set by Start
	feeds map[string]*fanout.Feed // by venue, set by Start
	pubs  map[string]*publisher   // by venue, set by Tap before Start
	resp  *nats.Subscription      // the book responder
	wants []*nats.Subscription    // P.want.<venue> and P.recover.<venue>, per venue
	stop  chan struct{}           // closes to stop the heartbeat
	hbNow chan struct{}           // capacity 1: heartbeat now (a venue was taken over)
	done  sync.WaitGroup          // the heartbeat goroutine
	hbBuf map[venue.Stream]uint64 // the heartbeat's scratch, its goroutine's only
}

// NewIngest returns an ingest publishing under subj as node, with a fresh
// epoch.
func NewIngest(subj Subjects, node string, log *slog.Logger) *Ingest {
	epoch := NewEpoch()
	return &Ingest{subj: subj, node: node, instance: node + "~" + epoch[:8], epoch: epoch, log: log, pubs: map[string]*publisher{},
		wantCapped: burstCounter{log: log, msg: "ingest: a want named more new symbols than one may add (counted in fanoutd_cluster_want_refused_total; the rest of this burst is not logged)"},
		stop:       make(chan struct{}), hbNow: make(chan struct{}, 1), hbBuf: map[venue.Stream]uint64{}}
}

// Epoch returns the ingest's own epoch (a venue it took over from another
// leader keeps that leader's).
func (in *Ingest) Epoch() string { return in.epoch }

// publisher publishes one venue's events while this node leads the venue
// (lead). Its first fields are guarded by the feed's lock: Tap is only
// ever called under it.
type publisher struct {
	in       *Ingest
	venue    string
	lead     atomic.Bool             // this node holds the venue's lease: it publishes
	subjects map[venue.Stream]string // subject per stream, built once
	msg      nats.Msg                // reused: one message at a time
	seqBuf   []byte
	failed   atomic.Uint64 // events not published: the connection was down (nothing is buffered while reconnecting)

	mu         sync.Mutex                 // protects the fields below
	epoch      string                     // the epoch this node publishes the venue in
	leader     string                     // the node leading the venue, as last known
	seen       map[venue.Stream]uint64    // following: the leader's last seq per stream
	seenAt     map[venue.Stream]time.Time // following: when its last event was seen
	seenEpoch  string                     // following: the leader's epoch
	followSubs []*nats.Subscription
}

// Tap returns the fanout.Options.Tap of venueName's feed. It publishes
// the event's bytes on its stream's subject with the epoch and seq
// headers. NATS copies the bytes into its outbound buffer before it
// returns, so the feed's buffer is not retained; while reconnecting the
// publish fails and is counted (Dropped).
func (in *Ingest) Tap(venueName string) func(venue.Stream, uint64, []byte) {
	p := &publisher{in: in, venue: venueName, subjects: map[venue.Stream]string{}, epoch: in.epoch,
		seen: map[venue.Stream]uint64{}, seenAt: map[venue.Stream]time.Time{}}
	p.msg.Header = nats.Header{HeaderEpoch: {in.epoch}, HeaderSeq: {""}, HeaderLeader: {in.instance}}
	in.pubs[venueName] = p
	return p.publish
}

func (p *publisher) publish(st venue.Stream, seq uint64, data []byte) {
	nc := p.in.nc
	if nc == nil || !p.lead.Load() {
		return
	}
	subj, ok := p.subjects[st]
	if !ok {
		subj = p.in.subj.Event(st)
		p.subjects[st] = subj
	}
	p.seqBuf = strconv.AppendUint(p.seqBuf[:0], seq, 10)
	p.msg.Subject, p.msg.Data = subj, data
	p.msg.Header[HeaderSeq][0] = string(p.seqBuf)
	if err := nc.PublishMsg(&p.msg); err != nil {
		n := p.failed.Add(1)
		if n == 1 || n%10000 == 0 {
			p.in.log.Warn("nats: publish failed (the edges announce the gap)", "stream", st, "seq", seq, "failed", n, "err", err)
		}
	}
	p.msg.Data = nil
}

// Dropped calls f, per venue, with the events this ingest led but could
// not publish because its connection was down (counted in
// fanoutd_cluster_publish_dropped_total; the edges announce each as a gap).
func (in *Ingest) Dropped(f func(venueName string, n uint64)) {
	for name, p := range in.pubs {
		f(name, p.failed.Load())
	}
}

// Sink wraps a venue's sink so that its notices are also published on
// the venue's notice subject.
func (in *Ingest) Sink(venueName string, inner venue.Sink) venue.Sink {
	return &noticeSink{Sink: inner, in: in, venue: venueName, subject: in.subj.Notice(venueName)}
}

type noticeSink struct {
	venue.Sink
	in      *Ingest
	venue   string
	subject string
}

func (s *noticeSink) Notice(n notice.Notice) {
	s.Sink.Notice(n)
	p := s.in.pubs[s.venue]
	if nc := s.in.nc; nc != nil && p != nil && p.lead.Load() {
		m := &nats.Msg{Subject: s.subject, Data: n.AppendJSON(nil), Header: nats.Header{HeaderEpoch: {p.epochNow()}, HeaderLeader: {s.in.instance}}}
		if err := nc.PublishMsg(m); err != nil {
			s.in.log.Warn("nats: notice publish failed", "kind", n.Kind.String(), "err", err)
		}
	}
}

// Start begins publishing on nc: each venue follows the bus until this
// node takes the venue's lease (lease.go), then publishes its events
// (through the taps), heartbeats, and answers book requests.
func (in *Ingest) Start(nc *nats.Conn, feeds []*fanout.Feed) error {
	in.feeds = map[string]*fanout.Feed{}
	for _, f := range feeds {
		in.feeds[f.Venue()] = f
	}
	sub, err := nc.Subscribe(in.subj.Prefix+".book.*.*", in.answerBook)
	if err != nil {
		return err
	}
	in.resp = sub
	for name := range in.pubs { // per venue: a venue no ingest serves has no responder
		w, err := nc.Subscribe(in.subj.Want(name), in.answerWant)
		if err != nil {
			sub.Unsubscribe()
			return err
		}
		in.wants = append(in.wants, w)
		r, err := nc.Subscribe(in.subj.Recover(name), in.answerRecover)
		if err != nil {
			sub.Unsubscribe()
			return err
		}
		in.wants = append(in.wants, r)
	}
	in.nc = nc // after the feeds map: the taps may run from here on
	for _, p := range in.pubs {
		p.follow()
	}
	in.done.Add(2)
	go in.heartbeats()
	go in.leases()
	return nil
}

// Stop stops the heartbeat, the responder and the wants. Events published after it
// still go out while the connection is open.
func (in *Ingest) Stop() {
	select {
	case <-in.stop:
		return
	default:
	}
	close(in.stop)
	in.done.Wait()
	if in.resp != nil {
		in.resp.Unsubscribe()
	}
	for _, w := range in.wants {
		w.Unsubscribe()
	}
}

func parseSeq(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

// Heartbeat is the body of a heartbeat message.
type Heartbeat struct {
	Node    string            `json:"node"`
	Epoch   string            `json:"epoch"`
	Streams map[string]uint64 `json:"streams"` // stream → its last seq
	// Link is the leader's link to the venue (up, down, connecting,
	// idle); absent from an ingest that does not say, taken as up.
	Link string `json:"link,omitempty"`
}

func (in *Ingest) heartbeats() {
	defer in.done.Done()
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	for {
		in.heartbeat()
		select {
		case <-in.stop:
			return
		case <-t.C:
		case <-in.hbNow:
		}
	}
}

func (in *Ingest) heartbeat() {
	for name, f := range in.feeds {
		p := in.pubs[name]
		if p == nil || !p.lead.Load() {
			continue
		}
		epoch := p.epochNow()
		clear(in.hbBuf)
		f.Seqs(in.hbBuf)
		hb := Heartbeat{Node: in.node, Epoch: epoch, Streams: make(map[string]uint64, len(in.hbBuf))}
		if in.Link != nil {
			hb.Link = in.Link(name)
		}
		for st, seq := range in.hbBuf {
			hb.Streams[string(st)] = seq
		}
		b, _ := json.Marshal(hb)
		in.nc.PublishMsg(&nats.Msg{Subject: in.subj.Heartbeat(name), Data: b, Header: nats.Header{HeaderEpoch: {epoch}, HeaderLeader: {in.instance}}})
	}
}

// answerBook answers a request on P.book.<venue>.<symbol>.
func (in *Ingest) answerBook(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, in.subj.Prefix+".book.")
	v, tok, _ := strings.Cut(rest, ".")
	p := in.pubs[v]
	if p == nil || !p.lead.Load() {
		return // the leader answers
	}
	reply := &nats.Msg{Header: nats.Header{HeaderEpoch: {p.epochNow()}, HeaderLeader: {in.instance}}}
	sym, ok := UnescapeToken(tok)
	f := in.feeds[v]
	var ev *venue.Event
	if ok && f != nil {
		if st, err := venue.ParseStream(v + ":level2:" + sym); err == nil {
			ev, ok = f.Book(st)
		}
	}
	if ev == nil || !ok {
		reply.Header.Set(HeaderError, "no book")
	} else {
		reply.Header.Set(HeaderSeq, strconv.FormatUint(ev.Seq, 10))
		reply.Data = ev.AppendJSON(nil)
	}
	m.RespondMsg(reply)
}
