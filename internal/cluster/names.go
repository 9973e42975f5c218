package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names timings.
const (
	// NamesSyncEvery is how often an edge writes the last seqs written to
	// its named subscribers' connections to the bucket: what a crash of
	// the edge may leave unrecorded (a client that states what it read
	// loses nothing to it).
	NamesSyncEvery = time.Second
	namesOpTimeout = 2 * time.Second
	claimAttempts  = 20
)

// ErrNameOwned is Claim's answer for a name another owner created.
var ErrNameOwned = errors.New("cluster: the name belongs to another owner")

// NameRecord is a named subscriber as the bucket holds it (JSON, one key
// per name).
type NameRecord struct {
	Owner   string            `json:"owner"`   // the token name that created it ("" without tokens)
	Node    string            `json:"node"`    // the node that holds it, or held it last
	Conn    string            `json:"conn"`    // the connection holding it; "" while none is attached
	Streams []string          `json:"streams"` // its subscriptions
	Last    map[string]uint64 `json:"last"`    // per stream, the last seq written to its connection
	Updated time.Time         `json:"updated"`
}

// NamedState is one named subscriber attached on this node now.
type NamedState struct {
	Name, Owner, Conn string
	Streams           []string
	Last              map[string]uint64
}

// Names keeps an edge's named subscribers in a JetStream key-value bucket,
// <prefix with '.' as '_'>_names, shared by every edge: who owns each name,
// which connection holds it cluster-wide (compare-and-set on the key's
// revision), its subscriptions and the last seq written per stream. A
// connection that claims a name another node's connection holds has every
// edge told (P.names.takeover, {"name","conn","by"}): the one holding conn
// closes it as taken over, the others forget a detached copy of the name. Build one
// with NewNames; Start it on the connection.
type Names struct {
	subj Subjects
	node string        // this process: the node's name and a random suffix (Instance)
	ttl  time.Duration // the bucket's max age (websocket.named_ttl); 0 keeps records
	log  *slog.Logger

	// TakeOver is called (from NATS's goroutine) when another node
	// claimed name from this node's connection conn.
	TakeOver func(name, conn string)
	// States returns the named subscribers attached here (for the sync).
	States func() []NamedState

	nc   *nats.Conn
	mu   sync.Mutex // protects kv and held
	kv   jetstream.KeyValue
	held map[string]*heldName // by name: the claims this node made and still holds

	poke chan struct{} // capacity 1: sync now (a subscription changed)
	stop chan struct{}
	wg   sync.WaitGroup
}

type heldName struct {
	conn    string
	rev     uint64
	written string // the streams and seqs last written, to skip unchanged puts
	at      time.Time
}

// NewNames returns the names of node under subj; records expire ttl after
// their last write (0: never).
func NewNames(subj Subjects, node string, ttl time.Duration, log *slog.Logger) *Names {
	return &Names{subj: subj, node: node + "~" + NewEpoch()[:8], ttl: max(ttl, 0), log: log, held: map[string]*heldName{}, poke: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Instance names this process in the records (their "node") and in the
// connection ids it is given: cluster.node and a random suffix, so two
// edges with one node name (one host) are still told apart.
func (n *Names) Instance() string { return n.node }

// Bucket is the name of the key-value bucket.
func (n *Names) Bucket() string { return strings.ReplaceAll(n.subj.Prefix, ".", "_") + "_names" }

// nameKey makes a subscriber name a key ('.' would separate key tokens).
func nameKey(name string) string { return strings.ReplaceAll(name, ".", "=2E") }

// Start listens for takeovers on nc and syncs the attached names every
// NamesSyncEvery. The bucket is created (or bound) on first use.
func (n *Names) Start(nc *nats.Conn) error {
	n.nc = nc
	if _, err := nc.Subscribe(n.subj.Prefix+".names.takeover", n.onTakeover); err != nil {
		return err
	}
	n.wg.Add(1)
	go n.syncLoop()
	return nil
}

// Stop ends the sync. The caller closes the connection.
func (n *Names) Stop() {
	select {
	case <-n.stop:
		return
	default:
	}
	close(n.stop)
	n.wg.Wait()
}

type takeoverMsg struct {
	Name string `json:"name"`
	Conn string `json:"conn"`
	By   string `json:"by"`
}

// onTakeover closes this node's connection that another node took a name
// from, once the bucket confirms it: the record must name t.By as the
// name's holder now. A takeover message alone (anyone who may publish on
// the subject could send one) closes nothing.
func (n *Names) onTakeover(m *nats.Msg) {
	var t takeoverMsg
	if json.Unmarshal(m.Data, &t) != nil || t.Name == "" || t.By == n.node {
		return
	}
	if !n.heldBy(t.Name, t.By) {
		n.log.Warn("names: a takeover the bucket does not confirm was ignored", "name", t.Name, "by", t.By)
		return
	}
	n.mu.Lock()
	if h := n.held[t.Name]; h != nil && h.conn == t.Conn {
		delete(n.held, t.Name)
	}
	n.mu.Unlock()
	if n.TakeOver != nil {
		n.TakeOver(t.Name, t.Conn)
	}
}

// heldBy reports whether the bucket's record of name says node holds it.
func (n *Names) heldBy(name, node string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), namesOpTimeout)
	defer cancel()
	kv, err := n.bucket(ctx)
	if err != nil {
		return false
	}
	e, err := kv.Get(ctx, nameKey(name))
	if err != nil {
		return false
	}
	var rec NameRecord
	return json.Unmarshal(e.Value(), &rec) == nil && rec.Node == node
}

// bucket returns the key-value bucket, creating it on first use.
func (n *Names) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.kv != nil {
		return n.kv, nil
	}
	if n.nc == nil {
		return nil, errors.New("cluster: names: not started")
	}
	js, err := jetstream.New(n.nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Bucket(), TTL: n.ttl, History: 1,
		Description: "fanoutd named subscribers: owner, holder, subscriptions, last seq written per stream"})
	if err != nil {
		return nil, err
	}
	n.kv = kv
	return kv, nil
}

// Claim takes name for connection conn of owner cluster-wide and returns
// the record as it was before (nil for a new name): the caller adopts its
// subscriptions and seqs if another node held it last. ErrNameOwned: the
// name belongs to another owner. The previous holder, if on another node,
// is told to close its connection as taken over.
func (n *Names) Claim(name, owner, conn string) (*NameRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), namesOpTimeout)
	defer cancel()
	kv, err := n.bucket(ctx)
	if err != nil {
		return nil, err
	}
	key := nameKey(name)
	for range claimAttempts {
		now := time.Now().UTC()
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			b, _ := json.Marshal(NameRecord{Owner: owner, Node: n.node, Conn: conn, Streams: []string{}, Last: map[string]uint64{}, Updated: now})
			rev, err := kv.Create(ctx, key, b)
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another connection created it first
			}
			if err != nil {
				return nil, err
			}
			n.hold(name, conn, rev, "")
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		var prev NameRecord
		if err := json.Unmarshal(e.Value(), &prev); err != nil {
			return nil, err
		}
		if prev.Owner != owner {
			return nil, ErrNameOwned
		}
		rec := prev
		rec.Node, rec.Conn, rec.Updated = n.node, conn, now
		b, _ := json.Marshal(rec)
		rev, err := kv.Update(ctx, key, b, e.Revision())
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue // someone wrote it since: read it again
		}
		n.hold(name, conn, rev, "")
		if prev.Conn != "" && prev.Node != n.node {
			t, _ := json.Marshal(takeoverMsg{Name: name, Conn: prev.Conn, By: n.node})
			n.nc.Publish(n.subj.Prefix+".names.takeover", t)
		}
		return &prev, nil
	}
	return nil, errors.New("cluster: names: the record of " + name + " kept changing")
}

func (n *Names) hold(name, conn string, rev uint64, written string) {
	n.mu.Lock()
	n.held[name] = &heldName{conn: conn, rev: rev, written: written, at: time.Now()}
	n.mu.Unlock()
}

// Release records that conn detached from name, with its last state,
// unless another connection holds the name since.
func (n *Names) Release(st NamedState) {
	n.mu.Lock()
	h := n.held[st.Name]
	if h != nil && h.conn == st.Conn {
		delete(n.held, st.Name)
	}
	n.mu.Unlock()
	if h == nil || h.conn != st.Conn {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), namesOpTimeout)
	defer cancel()
	kv, err := n.bucket(ctx)
	if err != nil {
		return
	}
	b, _ := json.Marshal(NameRecord{Owner: st.Owner, Node: n.node, Conn: "", Streams: st.Streams, Last: st.Last, Updated: time.Now().UTC()})
	if _, err := kv.Update(ctx, nameKey(st.Name), b, h.rev); err != nil {
		n.log.Debug("names: release not recorded (claimed elsewhere since?)", "name", st.Name, "err", err)
	}
}

// Changed asks for a sync now, without waiting for it: a named
// subscriber's subscriptions changed.
func (n *Names) Changed() {
	select {
	case n.poke <- struct{}{}:
	default:
	}
}

func (n *Names) syncLoop() {
	defer n.wg.Done()
	t := time.NewTicker(NamesSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.poke:
		}
		n.sync()
	}
}

// sync writes each attached name's streams and last seqs, if they changed
// (or the record would otherwise near its expiry), with a compare-and-set
// on the revision this node wrote: a name claimed elsewhere meanwhile is
// not overwritten, and is no longer held here.
func (n *Names) sync() {
	if n.States == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), namesOpTimeout)
	defer cancel()
	n.mu.Lock()
	kv := n.kv
	n.mu.Unlock()
	if kv == nil {
		return
	}
	for _, st := range n.States() {
		n.mu.Lock()
		h := n.held[st.Name]
		n.mu.Unlock()
		if h == nil || h.conn != st.Conn {
			continue
		}
		slices.Sort(st.Streams)
		sig, _ := json.Marshal(struct {
			S []string
			L map[string]uint64
		}{st.Streams, st.Last})
		if string(sig) == h.written && (n.ttl == 0 || time.Since(h.at) < n.ttl/4) {
			continue
		}
		b, _ := json.Marshal(NameRecord{Owner: st.Owner, Node: n.node, Conn: st.Conn, Streams: st.Streams, Last: maps.Clone(st.Last), Updated: time.Now().UTC()})
		rev, err := kv.Update(ctx, nameKey(st.Name), b, h.rev)
		n.mu.Lock()
		if cur := n.held[st.Name]; cur == h {
			if err != nil {
				delete(n.held, st.Name) // claimed elsewhere (or the bucket failed): stop writing it
			} else {
				h.rev, h.written, h.at = rev, string(sig), time.Now()
			}
		}
		n.mu.Unlock()
	}
}
