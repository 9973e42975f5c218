package wsapi

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fanoutd/fanoutd/internal/api"
	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// Names is the cluster's record of named subscribers (an edge's NATS
// key-value bucket, package cluster): who owns each name, which
// connection holds it cluster-wide, its subscriptions and the last seq
// written to it per stream. A Server without Names keeps names on this
// node only.
type Names interface {
	// Claim takes name for connection conn of owner, cluster-wide: the
	// connection that held it, on any node, is told it was taken over. It
	// returns ErrNameOwned if another owner created the name, and the
	// name's record as it was before the claim (nil for a new name): a
	// name last held on another node, or unknown here, is adopted (its
	// subscriptions and the seqs written).
	Claim(name, owner, conn string) (*NameRecord, error)
	// Release records that conn detached from name, with what was
	// written to it last; a record another connection holds since is left
	// alone.
	Release(name, conn string, st NamedState)
	// Changed says a named subscriber's subscriptions changed: the record
	// is written soon, not at the next periodic sync. It must not block.
	Changed()
}

// NameRecord is a named subscriber as the cluster last recorded it.
type NameRecord struct {
	Owner   string
	Node    string // the node that held it last
	Streams []venue.Stream
	Last    map[venue.Stream]uint64 // per stream, the last seq written to its connection
}

// NamedState is one attached named subscriber, for the cluster's record.
type NamedState struct {
	Name, Owner, Conn string
	Streams           []venue.Stream
	Last              map[venue.Stream]uint64
}

// ErrNameOwned is Names.Claim's answer for a name another owner created.
var ErrNameOwned = errors.New("wsapi: the name belongs to another owner")

// adoptWait bounds how long an adopting node waits for each stream's seq
// to be known here before it attaches the connection.
const adoptWait = 3 * time.Second

// parseLast parses the last= parameters of an attach:
// "<stream>:<seq>", one per stream (the seq after the stream's last ':').
func parseLast(q url.Values, max int) (map[venue.Stream]uint64, error) {
	vs := q["last"]
	if len(vs) == 0 {
		return nil, nil
	}
	if len(vs) > max {
		return nil, errors.New("more last= parameters than limits.max_streams_per_connection")
	}
	out := make(map[venue.Stream]uint64, len(vs))
	for _, v := range vs {
		i := strings.LastIndexByte(v, ':')
		if i < 0 {
			return nil, errors.New("last= wants <stream>:<seq>")
		}
		st, err := venue.ParseStream(v[:i])
		if err != nil {
			return nil, err
		}
		seq, err := strconv.ParseUint(v[i+1:], 10, 64)
		if err != nil {
			return nil, errors.New("last=" + v + ": the seq is not an unsigned integer")
		}
		out[st] = seq
	}
	return out, nil
}

// adopt makes the named subscriber rec, last held on another node, this
// node's: created with no connection, subscribed to the record's streams
// that tok may still have, and given until each has a seq here (at most
// adoptWait) so that the gaps its connection is told end where this node
// takes over. What arrives meanwhile is recorded as missed.
func (s *Server) adopt(name, tokName string, tok *api.Token, rec *NameRecord) {
	hub := s.o.Hub
	if old := hub.Registry().Named(name); old != nil {
		hub.Forget(name) // this node's state of it is older than the record
	}
	sub, _, err := hub.AttachFrom(name, tokName, nil, nil, nil)
	if err != nil {
		return
	}
	var held []venue.Stream
	for _, st := range rec.Streams {
		if !tok.Allows(st) || s.o.admits(st) != nil { // scopes first: admits may ask the ingest
			continue
		}
		if hub.Subscribe(sub, st) != nil {
			continue
		}
		if f := s.o.OnSubscribe; f != nil {
			f(st)
		}
		held = append(held, st)
	}
	deadline := time.Now().Add(adoptWait)
	for _, st := range held {
		f := hub.Feed(st.Venue())
		for f.Seq(st) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// backfill calls Options.Backfill for every stream of from, at once, and
// waits for them all.
func (s *Server) backfill(from map[venue.Stream]uint64) {
	if s.o.Backfill == nil || len(from) == 0 {
		return
	}
	var wg sync.WaitGroup
	for st, seq := range from {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.o.Backfill(st, seq+1)
		}()
	}
	wg.Wait()
}

// mergeLast is what a reattach states: the client's statement for the
// streams it names, the record's last written seq for the others.
func mergeLast(stated map[venue.Stream]uint64, rec *NameRecord) map[venue.Stream]uint64 {
	if rec == nil || len(rec.Last) == 0 {
		return stated
	}
	out := make(map[venue.Stream]uint64, len(rec.Last)+len(stated))
	for st, seq := range rec.Last {
		out[st] = seq
	}
	for st, seq := range stated {
		out[st] = seq
	}
	return out
}

// noteWritten records the last seq written per stream for a named
// subscriber's connection. data is the batch's data messages.
func (s *session) noteWritten(data []*subscriber.Message) {
	if s.written == nil {
		return
	}
	s.wrMu.Lock()
	for _, m := range data {
		if m.Stream != "" {
			s.written[venue.Stream(m.Stream)] = m.Seq
		}
	}
	s.wrMu.Unlock()
}

// NamedStates returns every named subscriber attached to this server now,
// with the last seq written to its connection per stream.
func (s *Server) NamedStates() []NamedState {
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if sess.written != nil && sess.sub != nil {
			list = append(list, sess)
		}
	}
	s.mu.Unlock()
	out := make([]NamedState, 0, len(list))
	for _, sess := range list {
		out = append(out, sess.namedState())
	}
	return out
}

func (sess *session) namedState() NamedState {
	st := NamedState{Name: sess.sub.ID(), Owner: sess.sub.Owner(), Conn: sess.connID, Streams: sess.sub.Streams(),
		Last: map[venue.Stream]uint64{}}
	sess.wrMu.Lock()
	for k, v := range sess.written {
		st.Last[k] = v
	}
	sess.wrMu.Unlock()
	return st
}

// TakeOver ends the connection conn holding name on this server, if it
// still does, as taken over (another node's connection claimed the name),
// and forgets the subscriber here: the node that claimed it has it now.
func (s *Server) TakeOver(name, conn string) {
	s.mu.Lock()
	var old *session
	for _, sess := range s.sessions {
		if sess.connID == conn && sess.sub != nil && sess.sub.ID() == name {
			old = sess
		}
	}
	s.mu.Unlock()
	if old == nil {
		if sub := s.o.Hub.Registry().Named(name); sub != nil && sub.Resolve() == nil {
			s.o.Hub.Forget(name) // detached here: its record moved on
		}
		return
	}
	old.end(TakenOver)
	s.o.Hub.Forget(name)
}
