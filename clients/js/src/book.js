// An order book kept exactly: prices are compared as scaled bigints
// (value × 10^18), levels are kept as the wire's canonical strings.

export const VALID = 'valid';
export const INVALID = 'invalid';

/** Why a book is invalid. */
export const Reason = Object.freeze({
  SUBSCRIBING: 'subscribing', // no snapshot yet on this connection
  GAP: 'gap', // seqs were lost: a snapshot is coming, or was asked for
  RESYNC: 'resync', // book_resync: the daemon rebuilds its book from the venue
  DROPPING: 'dropping', // the daemon drops this subscriber's newest events
  RECONNECTING: 'reconnecting', // the connection is down; the client reconnects
  LINK_DOWN: 'link_down', // the venue link dropped: stale until the venue's next snapshot
  BAD_LEVEL: 'bad_level', // an event held a price that does not parse; a snapshot was asked for
});

const SCALE = 18;
const PLAIN = /^(\d+)(?:\.(\d{1,18}))?$/;

/** The key of a non-negative decimal string: value × 10^18 as a bigint. */
export function priceKey(s) {
  const m = PLAIN.exec(s);
  if (m === null) throw new RangeError(`fanoutd: ${JSON.stringify(s)} is not a plain decimal of at most 18 fraction digits`);
  return BigInt(m[1] + (m[2] ?? '').padEnd(SCALE, '0'));
}

function isZero(s) {
  if (s === '0') return true;
  for (let i = 0; i < s.length; i++) if (s[i] !== '0' && s[i] !== '.') return false;
  return true;
}

class Side {
  constructor(bids) {
    this.bids = bids; // best is the highest price
    this.keys = []; // best first
    this.levels = new Map(); // key -> [price, size]
  }

  clear() {
    this.keys.length = 0;
    this.levels.clear();
  }

  // index returns where k is, or would be inserted, best first.
  index(k) {
    const keys = this.keys;
    let lo = 0;
    let hi = keys.length;
    if (this.bids) {
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (keys[mid] > k) lo = mid + 1; else hi = mid;
      }
    } else {
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (keys[mid] < k) lo = mid + 1; else hi = mid;
      }
    }
    return lo;
  }

  set(price, size) {
    const k = priceKey(price);
    const had = this.levels.has(k);
    if (isZero(size)) {
      if (had) {
        this.levels.delete(k);
        this.keys.splice(this.index(k), 1);
      }
    } else if (had) {
      this.levels.set(k, [price, size]);
    } else {
      this.levels.set(k, [price, size]);
      this.keys.splice(this.index(k), 0, k);
    }
  }

  top(n) {
    const keys = n > 0 ? this.keys.slice(0, n) : this.keys;
    return keys.map((k) => this.levels.get(k).slice());
  }
}

/** The book of one level2 stream; the client's reader updates it. */
export class Book {
  constructor(stream) {
    this.stream = stream;
    this._bids = new Side(true);
    this._asks = new Side(false);
    this.seq = 0;
    this.venueSeq = 0;
    this.venueTime = undefined; // RFC 3339 strings, as sent
    this.recvTime = undefined;
    this.state = INVALID;
    this.reason = Reason.SUBSCRIBING;
    this.gap = undefined; // [first, last] for reason gap
    this._waiters = [];
  }

  get valid() { return this.state === VALID; }

  /** Up to n levels of each side (all: n <= 0), best first, as [price, size] strings. */
  top(n = 0) { return { bids: this._bids.top(n), asks: this._asks.top(n) }; }

  /** The best bid and ask as [price, size] strings, undefined for an empty side. */
  bbo() {
    const { bids, asks } = this.top(1);
    return { bid: bids[0], ask: asks[0] };
  }

  /** A copy at this instant. */
  snapshot() {
    const { bids, asks } = this.top(0);
    return { stream: this.stream, seq: this.seq, venueSeq: this.venueSeq, venueTime: this.venueTime, recvTime: this.recvTime, state: this.state, reason: this.reason, bids, asks };
  }

  /** Resolves at the book's next change (levels or state). */
  changed() { return new Promise((resolve) => this._waiters.push(resolve)); }

  _notify() {
    if (this._waiters.length === 0) return;
    const w = this._waiters;
    this._waiters = [];
    for (const r of w) r();
  }

  /** Applies one event's levels; a snapshot replaces both sides. Throws on a price that does not parse. */
  _apply(snapshot, bids, asks) {
    if (snapshot) {
      this._bids.clear();
      this._asks.clear();
    }
    if (bids) for (const [p, s] of bids) this._bids.set(p, s);
    if (asks) for (const [p, s] of asks) this._asks.set(p, s);
  }
}
