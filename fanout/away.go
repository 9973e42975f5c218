package fanout

// A named subscriber with no connection loses every event of its streams
// until one attaches. Its loss is recorded per stream, not per event: when
// the feed first finds it detached, it marks each of its streams' last seq
// (leave); events are then skipped at the cost of a pointer load; on
// reattach each stream's gap is the seqs after its mark (back). So 10,000
// detached names cost the publisher a skip each, whatever their streams.

// mark is one stream's last seq before its subscriber left.
type mark struct {
	st  *stream
	seq uint64
}

// leave marks e detached: every stream's seq so far was not lost, but
// cur's latest (the event being delivered) was. Conflated streams have no
// gaps (a reattach gets their newest state). f.mu must be held.
func (e *entry) leave(cur *stream) {
	e.away = true
	e.marks = e.marks[:0]
	for _, st := range e.streams {
		if st.conflate {
			continue
		}
		seq := st.seq
		if st == cur {
			seq--
		}
		e.marks = append(e.marks, mark{st, seq})
	}
}

// markNew marks st, subscribed while e is away, at its seq now.
func (e *entry) markNew(st *stream) {
	if e.away && !st.conflate {
		e.marks = append(e.marks, mark{st, st.seq})
	}
}

// back turns e's marks into gaps and counts, once a connection is
// attached again: each stream lost the seqs after its mark up to its
// latest, except cur's latest, which goes to the new connection.
func (e *entry) back(cur *stream) {
	if !e.away {
		return
	}
	for _, m := range e.marks {
		last := m.st.seq
		if m.st == cur {
			last--
		}
		if last <= m.seq {
			continue
		}
		e.dropped += last - m.seq
		e.total += last - m.seq
		i := 0
		for i < len(e.gaps) && e.gaps[i].st != m.st {
			i++
		}
		if i == len(e.gaps) {
			e.gaps = append(e.gaps, gap{st: m.st, first: m.seq + 1, last: last})
			continue
		}
		g := &e.gaps[i]
		g.first, g.last = min(g.first, m.seq+1), max(g.last, last)
	}
	e.away = false
	clear(e.marks)
	e.marks = e.marks[:0]
}

// unmark drops st's mark (st is unsubscribed while e is away): what it
// lost still counts, as a lost event does, but it has no gap to report.
func (e *entry) unmark(st *stream) {
	for i, m := range e.marks {
		if m.st == st {
			e.dropped += st.seq - m.seq
			e.total += st.seq - m.seq
			e.marks[i] = e.marks[len(e.marks)-1]
			e.marks = e.marks[:len(e.marks)-1]
			return
		}
	}
}

// pending is what e has lost while away and not yet counted.
func (e *entry) pending() uint64 {
	var n uint64
	for _, m := range e.marks {
		n += m.st.seq - m.seq
	}
	return n
}
