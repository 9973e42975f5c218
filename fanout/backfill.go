package fanout

import (
	"bytes"

	"github.com/fanoutd/fanoutd/subscriber"
	"github.com/fanoutd/fanoutd/venue"
)

// A cluster's windows: an ingest keeps every stream it publishes
// (Options.KeepWindows), whether or not it has subscribers, and answers an
// edge's request for a range of it (Range); an edge adds what it got
// before its own window's oldest event (Backfill), so that a subscriber
// whose loss began before the edge followed the stream is recovered like
// any other.

// Range returns the wire forms of the events of stream id the window holds
// from seq from to seq to, in order: as many as fit in maxBytes, counting
// one byte more per event for a separator (at least one event), so a long
// range is read in several calls. ok is false if the
// window does not hold from (or the stream is conflated, or recovery is
// off); oldest and newest are the range the window holds (oldest 0:
// none). The bytes are shared, never written again.
func (f *Feed) Range(id venue.Stream, from, to uint64, maxBytes int) (data [][]byte, oldest, newest uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.streams[id]
	if st == nil || f.rec == nil || st.conflate || from == 0 || to < from {
		return nil, 0, 0, false
	}
	f.expire(st, f.now())
	w := &st.win
	if w.n == 0 {
		return nil, 0, 0, false
	}
	oldest, newest = w.at(0).Seq, w.at(w.n-1).Seq
	if from < oldest || from > newest {
		return nil, oldest, newest, false
	}
	size := 0
	for i := int(from - oldest); i < w.n && w.at(i).Seq <= to; i++ {
		d := w.at(i).Data
		if len(data) > 0 && size+len(d) > maxBytes {
			break
		}
		size += len(d) + 1
		data = append(data, d)
	}
	return data, oldest, newest, true
}

// Backfill puts the events data, at seqs first, first+1, …, into the
// window of stream id before its oldest event, or into an empty window if
// they end at the stream's seq: the range another node holds of what this
// node did not receive itself. Events the window already holds are
// skipped; the newest that fit the count and byte bounds are kept, never
// evicting what the window held. It returns the seq the window now holds
// from (0: none). The feed takes ownership of data.
func (f *Feed) Backfill(id venue.Stream, first uint64, data [][]byte) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.streams[id]
	b := f.rec
	if st == nil || b == nil || st.conflate || first == 0 || len(data) == 0 || len(st.subs) == 0 && !f.keepAll {
		return 0
	}
	w := &st.win
	end := st.seq // the seq after the last event to put in
	if w.n > 0 {
		end = w.at(0).Seq - 1
	}
	last := first + uint64(len(data)) - 1
	if last < end || first > end {
		return st.oldest() // not contiguous with what the window holds
	}
	data = data[:end-first+1]
	now := f.now()
	for i := len(data) - 1; i >= 0 && w.n < b.o.MaxEventsPerStream; i-- {
		m := &subscriber.Message{Stream: string(id), Seq: first + uint64(i), Data: data[i], Published: now,
			Snapshot: st.level2 && bytes.Contains(data[i], []byte(`,"snapshot":true`))}
		c := cost(m)
		if b.bytes.Load()+c > b.o.MaxBytes {
			break
		}
		if w.n == len(w.ring) {
			f.grow(st)
		}
		w.head = (w.head - 1) & (len(w.ring) - 1)
		w.ring[w.head] = m
		w.n++
		w.bytes += c
		f.rc.Events.Add(1)
		f.rc.Bytes.Add(c)
		b.bytes.Add(c)
		if w.n == 1 {
			b.windows.Add(1)
		}
	}
	return st.oldest()
}

// Oldest returns the first seq of stream id its window holds, 0 if none.
func (f *Feed) Oldest(id venue.Stream) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.streams[id]; st != nil && f.rec != nil {
		f.expire(st, f.now())
		return st.oldest()
	}
	return 0
}

// grow doubles st's ring, up to the smallest power of two that holds the
// count bound. f.mu must be held.
func (f *Feed) grow(st *stream) {
	w := &st.win
	size := max(16, 2*len(w.ring))
	for size/2 >= f.rec.o.MaxEventsPerStream && size > 16 {
		size /= 2
	}
	ring := make([]*subscriber.Message, size)
	for i := range w.n {
		ring[i] = w.at(i)
	}
	w.ring, w.head = ring, 0
}
