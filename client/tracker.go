package client

import "slices"

// tracker is the client's state machine over one logical subscription,
// across connections: per stream the last seq read, the losses announced,
// and for a level2 stream its book and what snapshot it waits for. It runs
// on the reader's goroutine only; books lock their own state.
type tracker struct {
	streams map[string]*tstream
	outbox  []Message // for the user, handed out by the caller after each step
	asks    []string  // streams whose snapshot op the caller is to send
}

// tstream is one stream's state.
type tstream struct {
	name      string
	level2    bool
	conflated bool
	last      uint64 // last seq read
	fresh     bool   // no event read on this connection yet
	announced [][2]uint64
	book      *Book // level2 only

	have     bool   // a snapshot was applied on this connection
	dropping bool   // the daemon dropping events for this subscriber (venue-wide)
	need     Reason // the snapshot awaited: "" none, else why
	min      uint64 // gap: the snapshot must reach at least this seq
	asked    bool   // a snapshot op of ours is outstanding
	holed    bool   // an update is missing since the last snapshot: levels no longer follow the daemon's
}

func newTracker() *tracker { return &tracker{streams: map[string]*tstream{}} }

func (t *tracker) emit(m Message) { t.outbox = append(t.outbox, m) }

// take returns and clears what the last steps produced.
func (t *tracker) take() (out []Message, asks []string) {
	out, asks = t.outbox, t.asks
	t.outbox, t.asks = nil, nil
	return out, asks
}

// add starts tracking stream (subscribed). It returns the stream's Book,
// nil for a stream that is not level2.
func (t *tracker) add(name string) *Book {
	if st := t.streams[name]; st != nil {
		return st.book
	}
	st := &tstream{name: name, level2: isLevel2(name), conflated: isConflated(name), fresh: true}
	if st.level2 {
		st.book = newBook(name)
		st.need = ReasonSubscribing
	}
	t.streams[name] = st
	return st.book
}

func (t *tracker) remove(name string) { delete(t.streams, name) }

// disconnected marks every book invalid (reconnecting).
func (t *tracker) disconnected() {
	for _, st := range t.streams {
		st.fresh, st.dropping, st.asked, st.have = true, false, false, false
		if st.level2 {
			st.need = ReasonReconnecting
			t.update(st)
		}
	}
}

// reason returns why st's book is invalid, "" if it is valid.
func (st *tstream) reason() Reason {
	switch {
	case st.need != "":
		return st.need
	case !st.have:
		return ReasonSubscribing
	case st.dropping:
		return ReasonDropping
	}
	return ReasonNone
}

// update publishes st's state to its book and, on a change, to the user.
func (t *tracker) update(st *tstream) {
	b := st.book
	r := st.reason()
	s := Invalid
	if r == ReasonNone {
		s = Valid
	}
	b.mu.Lock()
	changed := b.setState(s, r)
	if r == ReasonGap {
		b.gapFirst, b.gapLast = st.gapRange()
	}
	seq, gf, gl := b.seq, b.gapFirst, b.gapLast
	if changed {
		b.notify()
	}
	b.mu.Unlock()
	if changed {
		t.emit(&BookState{Stream: st.name, State: s, Reason: r, Seq: seq, GapFirst: gf, GapLast: gl})
	}
}

// gapRange is the span of the losses announced or seen and not yet
// repaired, for the book's state.
func (st *tstream) gapRange() (uint64, uint64) {
	if len(st.announced) == 0 {
		return 0, 0
	}
	return st.announced[0][0], st.announced[len(st.announced)-1][1]
}

// announce records a loss the client has been told of (or has seen), so
// that the hole it leaves is not reported again.
func (st *tstream) announce(first, last uint64) {
	st.announced = append(st.announced, [2]uint64{first, last})
	slices.SortFunc(st.announced, func(a, b [2]uint64) int { return int(int64(a[0]) - int64(b[0])) })
}

// unannounced returns the parts of first..last not announced, and drops
// the announcements that end before last.
func (st *tstream) unannounced(first, last uint64) [][2]uint64 {
	var out [][2]uint64
	cur := first
	for _, a := range st.announced {
		if a[1] < cur || a[0] > last {
			continue
		}
		if a[0] > cur {
			out = append(out, [2]uint64{cur, a[0] - 1})
		}
		cur = max(cur, a[1]+1)
	}
	if cur <= last {
		out = append(out, [2]uint64{cur, last})
	}
	st.announced = slices.DeleteFunc(st.announced, func(a [2]uint64) bool { return a[1] <= last })
	return out
}

// hole handles seqs first..last missing before the event read.
func (t *tracker) hole(st *tstream, first, last uint64) {
	for _, r := range st.unannounced(first, last) {
		t.emit(&Gap{Stream: st.name, First: r[0], Last: r[1], Reason: "hole"})
	}
}

// data handles one event. It reports whether the event is new (to be
// handed to the user): an event at or before the last seq read is a
// duplicate.
func (t *tracker) data(w *wire, ev *BookEvent) bool {
	st := t.streams[w.Stream]
	if st == nil {
		return true // a stream not (or no longer) tracked: passed through
	}
	if st.level2 && w.Type == "book" {
		return t.book(st, w, ev)
	}
	switch {
	case st.fresh && st.last > 0 && w.Seq <= st.last:
		// The stream's numbering started again (the daemon forgot it, or
		// it restarted): what was lost in between cannot be named.
		t.emit(&Gap{Stream: st.name, Reason: "restart"})
		st.announced = st.announced[:0]
	case w.Seq <= st.last:
		return false
	case w.Seq > st.last+1 && st.last > 0 && !st.conflated:
		t.hole(st, st.last+1, w.Seq-1)
	}
	st.last, st.fresh = w.Seq, false
	return true
}

// book handles a level2 book event.
func (t *tracker) book(st *tstream, w *wire, ev *BookEvent) bool {
	if w.Snapshot {
		accept := true
		switch st.need {
		case ReasonResync, ReasonLinkDown:
			// A snapshot at the seq last read (a reply, a resume) is the
			// book the daemon is replacing; the venue's rebuilt one is
			// published at a new seq, past everything queued before it.
			accept = w.Seq > st.last
		case ReasonGap:
			accept = w.Seq >= st.min
		}
		if !accept {
			return true
		}
		b := st.book
		b.mu.Lock()
		err := b.apply(ev)
		b.notify()
		b.mu.Unlock()
		st.last, st.fresh, st.have, st.asked, st.holed = w.Seq, false, true, false, false
		st.announced = slices.DeleteFunc(st.announced, func(a [2]uint64) bool { return a[1] <= w.Seq })
		st.need = ""
		if err != nil {
			t.bad(st)
		}
		t.update(st)
		return true
	}
	if w.Seq <= st.last {
		return false
	}
	if !st.have && st.need == ReasonReconnecting && st.last > 0 {
		// An update before any snapshot on a new connection: the book
		// continues if nothing is missing, else the hole is named and a
		// snapshot asked for.
		if w.Seq == st.last+1 && st.book.Seq() == st.last {
			st.have, st.need = true, ""
		} else {
			t.hole(st, st.last+1, w.Seq-1)
			st.announce(st.last+1, w.Seq-1)
			st.need, st.min, st.holed = ReasonGap, w.Seq, true
			t.request(st)
		}
	}
	if st.have && w.Seq > st.last+1 {
		st.holed = true
		t.hole(st, st.last+1, w.Seq-1)
		if st.need == "" {
			st.need, st.min = ReasonGap, w.Seq
			st.announce(st.last+1, w.Seq-1)
			if !st.dropping {
				t.request(st)
			}
		}
	}
	st.last, st.fresh = w.Seq, false
	// During a resync or a link drop the updates still queued continue the
	// daemon's book: applied, the levels stay equal to it at each seq (the
	// book stays invalid all the same).
	if st.have && !st.holed && (st.need == "" || st.need == ReasonResync || st.need == ReasonLinkDown) {
		b := st.book
		b.mu.Lock()
		err := b.apply(ev)
		b.notify()
		b.mu.Unlock()
		if err != nil {
			t.bad(st)
		}
	}
	t.update(st)
	return true
}

// bad handles a book event the book could not apply.
func (t *tracker) bad(st *tstream) {
	st.need, st.min = ReasonBadLevel, st.last
	t.request(st)
}

func (t *tracker) request(st *tstream) {
	if st.asked {
		return
	}
	st.asked = true
	t.asks = append(t.asks, st.name)
}

// snapshotRefused handles an error reply to our snapshot op.
func (t *tracker) snapshotRefused(stream string) {
	if st := t.streams[stream]; st != nil {
		st.asked = false
	}
}

// venueStreams calls f for each tracked stream of venue v.
func (t *tracker) venueStreams(v string, f func(*tstream)) {
	for _, st := range t.streams {
		if venueOf(st.name) == v {
			f(st)
		}
	}
}

// notice handles a notice; the notice itself is handed to the user first.
func (t *tracker) notice(n *Notice) {
	t.emit(n)
	switch n.Kind {
	case "book_resync":
		if st := t.streams[n.Stream]; st != nil && st.level2 {
			// Notices are written ahead of queued events: what is still
			// queued continues the old book, and the rebuilt one comes as
			// a snapshot at a seq past everything read before it.
			st.need = ReasonResync
			t.update(st)
		}
	case "link_down":
		only, partial := n.Details["streams"].([]any)
		t.venueStreams(n.Venue, func(st *tstream) {
			if !st.level2 || (partial && !slices.Contains(only, any(st.name))) {
				return
			}
			st.need = ReasonLinkDown
			t.update(st)
		})
	case "dropping":
		t.venueStreams(n.Venue, func(st *tstream) {
			st.dropping = true
			if st.level2 {
				t.update(st)
			}
		})
	case "resumed":
		gaps, _ := n.Details["gaps"].(map[string]any)
		recovered := recoveredOf(n.Details["recovered"])
		t.venueStreams(n.Venue, func(st *tstream) {
			st.dropping = false
			g, ok := gaps[st.name].([]any)
			if ok && len(g) == 2 && !recovered[st.name] {
				first, _ := g[0].(float64)
				last, _ := g[1].(float64)
				f, l := uint64(first), uint64(last)
				if l >= f && l > 0 {
					st.announce(f, l)
					t.emit(&Gap{Stream: st.name, First: f, Last: l, Reason: "resumed"})
					if st.level2 && st.need != ReasonResync && st.need != ReasonLinkDown {
						// A snapshot at the gap's end or later follows.
						st.need, st.min = ReasonGap, l
					}
				}
			}
			if st.level2 {
				t.update(st)
			}
		})
	case "stream_gap":
		if st := t.streams[n.Stream]; st != nil {
			first, _ := n.Details["first"].(float64)
			last, _ := n.Details["last"].(float64)
			if f, l := uint64(first), uint64(last); l >= f && l > 0 {
				st.announce(f, l)
				t.emit(&Gap{Stream: st.name, First: f, Last: l, Reason: "stream_gap"})
			}
		}
	}
}

// recoveredOf reads resumed's "recovered": the streams whose lost range
// the daemon re-sends in seq order (a list of names, or an object keyed
// by name). Those streams have no gap: their events follow.
func recoveredOf(v any) map[string]bool {
	out := map[string]bool{}
	switch r := v.(type) {
	case []any:
		for _, s := range r {
			if s, ok := s.(string); ok {
				out[s] = true
			}
		}
	case map[string]any:
		for s := range r {
			out[s] = true
		}
	}
	return out
}

// lastRead returns, per stream, the last seq read (for last= on a named
// reattach); streams with none are left out.
func (t *tracker) lastRead() map[string]uint64 {
	out := map[string]uint64{}
	for _, st := range t.streams {
		if st.last > 0 {
			out[st.name] = st.last
		}
	}
	return out
}
