// The client's state machine, the same as the Go client's
// (client/tracker.go) and the Python one's: per stream the last seq read
// and the losses announced; per level2 stream its book and the snapshot it
// waits for.

import { Book, INVALID, Reason, VALID } from './book.js';

function channel(stream) {
  const parts = stream.split(':');
  return parts.length >= 3 ? parts[1] : '';
}

class TStream {
  constructor(name) {
    const ch = channel(name);
    this.name = name;
    this.level2 = ch === 'level2';
    this.conflated = ch === 'quote' || ch.startsWith('book_snapshot_');
    this.last = 0;
    this.fresh = true;
    this.announced = [];
    this.book = this.level2 ? new Book(name) : undefined;
    this.have = false;
    this.dropping = false;
    this.need = this.level2 ? Reason.SUBSCRIBING : '';
    this.min = 0;
    this.asked = false;
    this.holed = false;
  }

  reason() {
    if (this.need) return this.need;
    if (!this.have) return Reason.SUBSCRIBING;
    if (this.dropping) return Reason.DROPPING;
    return '';
  }

  announce(first, last) {
    this.announced.push([first, last]);
    this.announced.sort((a, b) => a[0] - b[0]);
  }

  unannounced(first, last) {
    const out = [];
    let cur = first;
    for (const [a0, a1] of this.announced) {
      if (a1 < cur || a0 > last) continue;
      if (a0 > cur) out.push([cur, a0 - 1]);
      cur = Math.max(cur, a1 + 1);
    }
    if (cur <= last) out.push([cur, last]);
    this.announced = this.announced.filter((a) => a[1] > last);
    return out;
  }
}

export class Tracker {
  constructor() {
    this.streams = new Map();
    this.outbox = [];
    this.asks = [];
  }

  take() {
    const r = { out: this.outbox, asks: this.asks };
    this.outbox = [];
    this.asks = [];
    return r;
  }

  add(name) {
    let st = this.streams.get(name);
    if (st === undefined) this.streams.set(name, (st = new TStream(name)));
    return st.book;
  }

  remove(name) { this.streams.delete(name); }

  lastRead() {
    const out = {};
    for (const st of this.streams.values()) if (st.last > 0) out[st.name] = st.last;
    return out;
  }

  disconnected() {
    for (const st of this.streams.values()) {
      st.fresh = true; st.dropping = false; st.asked = false; st.have = false;
      if (st.level2) {
        st.need = Reason.RECONNECTING;
        this._update(st);
      }
    }
  }

  _update(st) {
    const b = st.book;
    const r = st.reason();
    const s = r === '' ? VALID : INVALID;
    if (b.state !== s || b.reason !== r) {
      const gap = r === Reason.GAP && st.announced.length > 0 ? [st.announced[0][0], st.announced[st.announced.length - 1][1]] : undefined;
      b.state = s; b.reason = r; b.gap = gap;
      b._notify();
      this.outbox.push({ type: 'book_state', stream: st.name, state: s, reason: r, seq: b.seq, gap });
    }
  }

  _hole(st, first, last) {
    for (const [f, l] of st.unannounced(first, last)) this.outbox.push({ type: 'gap', stream: st.name, first: f, last: l, reason: 'hole' });
  }

  _request(st) {
    if (!st.asked) {
      st.asked = true;
      this.asks.push(st.name);
    }
  }

  snapshotRefused(stream) {
    const st = this.streams.get(stream);
    if (st) st.asked = false;
  }

  /** Handles one event; whether it is new (to be handed out). */
  data(o) {
    const st = this.streams.get(o.stream);
    if (st === undefined) return true;
    const seq = o.seq ?? 0;
    if (st.level2 && o.type === 'book') return this._book(st, o, seq);
    if (st.fresh && st.last > 0 && seq <= st.last) {
      this.outbox.push({ type: 'gap', stream: st.name, first: 0, last: 0, reason: 'restart' });
      st.announced = [];
    } else if (seq <= st.last) {
      return false;
    } else if (seq > st.last + 1 && st.last > 0 && !st.conflated) {
      this._hole(st, st.last + 1, seq - 1);
    }
    st.last = seq; st.fresh = false;
    return true;
  }

  _apply(st, o, snapshot) {
    const b = st.book;
    try {
      b._apply(snapshot, o.bids, o.asks);
    } catch {
      st.need = Reason.BAD_LEVEL; st.min = st.last;
      this._request(st);
    }
    b.seq = o.seq; b.venueSeq = o.venue_seq ?? 0; b.venueTime = o.venue_time; b.recvTime = o.recv_time;
    b._notify();
  }

  _book(st, o, seq) {
    if (o.snapshot) {
      let accept = true;
      // A snapshot at the seq last read (a reply, a resume) is the book
      // being replaced; the rebuilt one is published at a new seq.
      if (st.need === Reason.RESYNC || st.need === Reason.LINK_DOWN) accept = seq > st.last;
      else if (st.need === Reason.GAP) accept = seq >= st.min;
      if (!accept) return true;
      st.need = '';
      st.last = seq; st.fresh = false; st.have = true; st.asked = false; st.holed = false;
      st.announced = st.announced.filter((a) => a[1] > seq);
      this._apply(st, o, true);
      this._update(st);
      return true;
    }
    if (seq <= st.last) return false;
    if (!st.have && st.need === Reason.RECONNECTING && st.last > 0) {
      // An update before any snapshot on a new connection: the book
      // continues if nothing is missing, else the hole is named and a
      // snapshot asked for.
      if (seq === st.last + 1 && st.book.seq === st.last) {
        st.have = true; st.need = '';
      } else {
        this._hole(st, st.last + 1, seq - 1);
        st.announce(st.last + 1, seq - 1);
        st.need = Reason.GAP; st.min = seq; st.holed = true;
        this._request(st);
      }
    }
    if (st.have && seq > st.last + 1) {
      st.holed = true;
      this._hole(st, st.last + 1, seq - 1);
      if (!st.need) {
        st.need = Reason.GAP; st.min = seq;
        st.announce(st.last + 1, seq - 1);
        if (!st.dropping) this._request(st);
      }
    }
    st.last = seq; st.fresh = false;
    // During a resync or a link drop the updates still queued continue the
    // daemon's book: applied, the levels stay equal to it.
    if (st.have && !st.holed && (st.need === '' || st.need === Reason.RESYNC || st.need === Reason.LINK_DOWN)) this._apply(st, o, false);
    this._update(st);
    return true;
  }

  * _venue(v) {
    for (const st of this.streams.values()) if (st.name.split(':', 1)[0] === v) yield st;
  }

  notice(n) {
    this.outbox.push(n);
    const d = n.details ?? {};
    switch (n.kind) {
      case 'book_resync': {
        const st = this.streams.get(n.stream);
        if (st && st.level2) {
          st.need = Reason.RESYNC;
          this._update(st);
        }
        break;
      }
      case 'link_down':
        for (const st of this._venue(n.venue)) {
          if (st.level2 && (!Array.isArray(d.streams) || d.streams.includes(st.name))) {
            st.need = Reason.LINK_DOWN;
            this._update(st);
          }
        }
        break;
      case 'dropping':
        for (const st of this._venue(n.venue)) {
          st.dropping = true;
          if (st.level2) this._update(st);
        }
        break;
      case 'resumed': {
        const gaps = d.gaps ?? {};
        const rec = d.recovered ?? [];
        const recovered = Array.isArray(rec) ? rec : Object.keys(rec);
        for (const st of this._venue(n.venue)) {
          st.dropping = false;
          const g = gaps[st.name];
          if (Array.isArray(g) && g.length === 2 && !recovered.includes(st.name)) {
            const [f, l] = g;
            if (l >= f && l > 0) {
              st.announce(f, l);
              this.outbox.push({ type: 'gap', stream: st.name, first: f, last: l, reason: 'resumed' });
              if (st.level2 && st.need !== Reason.RESYNC && st.need !== Reason.LINK_DOWN) {
                st.need = Reason.GAP; st.min = l;
              }
            }
          }
          if (st.level2) this._update(st);
        }
        break;
      }
      case 'stream_gap': {
        const st = this.streams.get(n.stream);
        if (st) {
          const f = d.first ?? 0;
          const l = d.last ?? 0;
          if (l >= f && l > 0) {
            st.announce(f, l);
            this.outbox.push({ type: 'gap', stream: st.name, first: f, last: l, reason: 'stream_gap' });
          }
        }
        break;
      }
      default:
    }
  }
}
