// The client: one connection that stays up, books kept exactly.

import { Tracker } from './tracker.js';

export const CLOSE_TAKEN_OVER = 4001;
export const CLOSE_UNREAD_REPLIES = 4002;

const FATAL = new Set(['unauthenticated', 'unauthorized', 'origin_not_allowed', 'bad_name', 'name_taken', 'taken_over']);
const STATUS_CODES = { 400: 'bad_request', 401: 'unauthenticated', 403: 'unauthorized', 409: 'name_taken', 429: 'too_many_connections', 503: 'shutting_down' };

/** A refusal by the daemon; code against `code`. */
export class FanoutdError extends Error {
  constructor(code, message = '', { id, httpStatus, closeCode } = {}) {
    super(message ? `${code}: ${message}` : code);
    this.name = 'FanoutdError';
    this.code = code;
    this.id = id;
    this.httpStatus = httpStatus;
    this.closeCode = closeCode;
  }

  /** Whether reconnecting cannot help; a fatal error ends run(). */
  get fatal() {
    return FATAL.has(this.code) || (this.code === 'bad_request' && this.httpStatus !== undefined);
  }
}

/** A close by the daemon with a code that is not one of its errors (1001 on shutdown). */
export class ClosedError extends Error {
  constructor(code, reason = '') {
    super(`closed ${code} ${reason}`);
    this.name = 'ClosedError';
    this.code = code;
    this.reason = reason;
  }
}

const isNode = typeof process !== 'undefined' && !!process.versions?.node;

// openSocket opens a websocket: the `ws` package in Node (headers, the
// refused upgrade's status and body), the browser's WebSocket elsewhere
// (the token then goes as ?token=; a refused upgrade is only a failure).
async function openSocket(url, token) {
  if (isNode) {
    const { default: WS } = await import('ws');
    return new Promise((resolve, reject) => {
      const ws = new WS(url, { headers: token ? { Authorization: `Bearer ${token}` } : {}, perMessageDeflate: false, maxPayload: 0 });
      ws.on('unexpected-response', (_req, res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => reject(refusal(res.statusCode, Buffer.concat(chunks).toString())));
        res.on('error', () => reject(refusal(res.statusCode, '')));
      });
      ws.once('open', () => resolve(ws));
      ws.once('error', (e) => reject(e));
    });
  }
  const u = new URL(url);
  if (token) u.searchParams.set('token', token);
  return new Promise((resolve, reject) => {
    const ws = new globalThis.WebSocket(u.toString());
    ws.onopen = () => resolve(ws);
    ws.onerror = () => reject(new Error(`fanoutd: cannot connect to ${url}`));
  });
}

function refusal(status, body) {
  try {
    const o = JSON.parse(body);
    if (o && o.code) return new FanoutdError(o.code, o.message ?? '', { httpStatus: status });
  } catch { /* not JSON */ }
  return new FanoutdError(STATUS_CODES[status] ?? `http_${status}`, `HTTP ${status}`, { httpStatus: status });
}

/**
 * A connection to fanoutd that stays connected: it reconnects with backoff
 * and jitter to the next of its URLs, resubscribes (ephemeral) or
 * reattaches stating last=<stream>:<seq> (named), keeps a Book per level2
 * stream and reports every loss. `onMessage` receives every message in
 * order; one that returns a promise is awaited and the socket is paused
 * meanwhile (the client stops reading).
 */
export class Client {
  constructor({ urls, token, name, onMessage, minBackoff = 100, maxBackoff = 10000 } = {}) {
    this.urls = typeof urls === 'string' ? [urls] : [...(urls ?? [])];
    if (this.urls.length === 0) throw new Error('fanoutd: no URL');
    this.token = token;
    this.name = name;
    this.onMessage = onMessage;
    this.minBackoff = minBackoff;
    this.maxBackoff = Math.max(maxBackoff, minBackoff);
    this._tr = new Tracker();
    this._want = [];
    this._ws = undefined;
    this._waiters = new Map();
    this._queued = [];
    this._next = 0;
    this._running = undefined;
    this._stopped = false;
    this.error = undefined;
    this.done = false;
    this._doneWaiters = [];
    this._drop = undefined;
    this._stopTimer = undefined;
  }

  /** Starts run() once; returns its promise. */
  start() {
    if (!this._running) this._running = this.run();
    return this._running;
  }

  /** Stops the client. */
  async close() {
    this._stopped = true;
    if (this._stopTimer) this._stopTimer();
    if (this._ws) this._ws.close();
    if (this._running) await this._running.catch(() => {});
  }

  /** Resolves when run() has ended, with the error it ended with. */
  waitClosed() {
    if (this.done) return Promise.resolve(this.error);
    return new Promise((r) => this._doneWaiters.push(r));
  }

  /** Closes the current connection; the client reconnects as after a failure. */
  reconnect() { if (this._drop) this._drop(); }

  book(stream) { return this._tr.streams.get(stream)?.book; }

  /** Subscribes and waits for the daemon's answer; rejects with its refusal (nothing subscribed). */
  async subscribe(...streams) {
    if (streams.length === 0) throw new Error('fanoutd: no stream');
    if (this.done) throw this.error ?? new FanoutdError('closed');
    for (const s of streams) {
      if (s.split(':').length < 3) throw new Error(`fanoutd: stream ${JSON.stringify(s)} is not venue:channel:symbol`);
      if (!this._want.includes(s)) this._want.push(s);
      this._tr.add(s);
    }
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject, streams };
      if (this._ws) {
        const id = this._id('sub');
        this._wait(id, entry);
        this._send({ op: 'subscribe', id, streams });
      } else {
        this._queued.push(entry);
      }
    });
  }

  async unsubscribe(...streams) {
    for (const s of streams) {
      this._want = this._want.filter((x) => x !== s);
      this._tr.remove(s);
    }
    if (this._ws) this._send({ op: 'unsubscribe', id: this._id('unsub'), streams });
  }

  /**
   * CCXT Pro's watchOrderBook: waits for the book's next valid state
   * (subscribing first if needed) and returns CCXT's shape: bids and asks
   * ([price, size] strings, best first, at most limit), symbol, timestamp
   * (ms of the venue's time, else the receive time), datetime, nonce (seq).
   */
  async watchOrderBook(stream, limit = 0) {
    this.start();
    if (!this._want.includes(stream)) await this.subscribe(stream);
    const b = this.book(stream);
    if (!b) throw new Error(`fanoutd: ${stream} is not a level2 stream`);
    this._watched ??= new Map();
    const seen = this._watched.get(stream);
    while (!(b.valid && b.seq !== seen)) {
      if (this.done) throw this.error ?? new FanoutdError('closed');
      await Promise.race([b.changed(), this.waitClosed()]);
    }
    this._watched.set(stream, b.seq);
    const { bids, asks } = b.top(limit);
    const t = b.venueTime ?? b.recvTime;
    const ms = t ? Date.parse(t) : undefined;
    return { bids, asks, symbol: stream.split(':').slice(2).join(':'), stream, timestamp: ms, datetime: ms !== undefined ? new Date(ms).toISOString() : undefined, nonce: b.seq };
  }

  _id(p) { this._next += 1; return `${p}${this._next}`; }

  _wait(id, entry) {
    const l = this._waiters.get(id);
    if (l) l.push(entry); else this._waiters.set(id, [entry]);
  }

  _send(obj) {
    const ws = this._ws;
    if (ws && ws.readyState === 1) ws.send(JSON.stringify(obj));
  }

  async _deliver(msgs) {
    const h = this.onMessage;
    if (!h) return;
    for (const m of msgs) {
      const r = h(m);
      if (r && typeof r.then === 'function') await r;
    }
  }

  async _flush(extra) {
    const { out, asks } = this._tr.take();
    for (const s of asks) this._send({ op: 'snapshot', id: `snap:${s}`, stream: s });
    if (extra !== undefined) out.push(extra);
    await this._deliver(out);
  }

  _dialURL(u) {
    if (!this.name) return u;
    const url = new URL(u);
    url.searchParams.append('name', this.name);
    const last = this._tr.lastRead();
    for (const s of Object.keys(last).sort()) url.searchParams.append('last', `${s}:${last[s]}`);
    return url.toString();
  }

  /** Connects and stays connected until close() or a fatal refusal (rejects with it). */
  async run() {
    let attempt = 0;
    let i = 0;
    try {
      while (!this._stopped) {
        const u = this.urls[i % this.urls.length];
        let err;
        const stable = { ok: false };
        try {
          await this._session(u, attempt, stable);
        } catch (e) {
          err = e;
        }
        if (stable.ok) attempt = 0;
        this._tr.disconnected();
        await this._flush({ type: 'disconnected', url: u, error: err });
        if (err instanceof FanoutdError && err.fatal) {
          this.error = err;
          throw err;
        }
        if (this._stopped) break;
        i += 1;
        const d = Math.min(this.maxBackoff, this.minBackoff * 2 ** Math.min(attempt, 20));
        attempt += 1;
        await new Promise((resolve) => {
          const t = setTimeout(resolve, d / 2 + Math.random() * d / 2);
          this._stopTimer = () => { clearTimeout(t); resolve(); };
        });
      }
    } finally {
      this.error ??= new FanoutdError('closed');
      this.done = true;
      for (const e of [...this._queued, ...[...this._waiters.values()].flat()]) e.reject(this.error);
      this._queued = [];
      this._waiters.clear();
      for (const r of this._doneWaiters) r(this.error);
      this._doneWaiters = [];
    }
  }

  _session(u, attempt, stable) {
    return openSocket(this._dialURL(u), this.token).then((ws) => new Promise((resolve, reject) => {
      this._ws = ws;
      let resub;
      if (this._want.length > 0) {
        resub = this._id('resub');
        for (const e of this._queued) this._wait(resub, e);
        this._queued = [];
      }
      let takenOver;
      let dropped = false;
      let ended = false;
      const pending = [];
      let busy = false;
      const end = (err) => {
        if (ended) return;
        ended = true;
        this._ws = undefined;
        for (const l of this._waiters.values()) this._queued.push(...l);
        this._waiters.clear();
        this._drop = undefined;
        reject(err);
      };
      this._drop = () => { dropped = true; ws.close(); };
      const pump = async () => {
        if (busy) return;
        busy = true;
        try {
          while (pending.length > 0) {
            const data = pending.shift();
            for (const line of data.split('\n')) {
              const e = await this._handle(line, resub, stable);
              if (e) takenOver = e;
            }
            if (pending.length === 0 && closedWith) break;
          }
        } finally {
          busy = false;
          if (isNode && ws.isPaused) ws.resume();
          if (closedWith && pending.length === 0) finish();
        }
      };
      let closedWith;
      const finish = () => {
        const { code, reason } = closedWith;
        if (dropped) return end(new ClosedError(1000, 'reconnect'));
        if (code === CLOSE_TAKEN_OVER) {
          const e = takenOver ?? new FanoutdError('taken_over', reason);
          e.closeCode = code;
          return end(e);
        }
        if (code === CLOSE_UNREAD_REPLIES) return end(new FanoutdError('unread_replies', reason, { closeCode: code }));
        if (code === 1008 && reason === 'name_taken') return end(new FanoutdError('name_taken', reason, { closeCode: code }));
        if (takenOver) return end(takenOver);
        return end(new ClosedError(code, reason));
      };
      const onData = (data) => {
        pending.push(typeof data === 'string' ? data : data.toString());
        if (busy && isNode && !ws.isPaused) ws.pause();
        pump();
      };
      const onClose = (code, reason) => {
        closedWith = { code, reason: String(reason ?? '') };
        if (!busy && pending.length === 0) finish();
      };
      if (isNode) {
        ws.on('message', (data) => onData(data));
        ws.on('close', (code, reason) => onClose(code, reason));
        ws.on('error', () => {});
      } else {
        ws.onmessage = (ev) => onData(ev.data);
        ws.onclose = (ev) => onClose(ev.code, ev.reason);
      }
      this._deliver([{ type: 'connected', url: u, attempt }]).then(() => {
        if (resub) ws.send(JSON.stringify({ op: 'subscribe', id: resub, streams: [...this._want] }));
        else stable.ok = true;
      });
    }));
  }

  async _handle(line, resub, stable) {
    let o;
    try { o = JSON.parse(line); } catch { return undefined; }
    switch (o.type) {
      case 'ack':
      case 'pong':
        if (o.id === resub) stable.ok = true;
        this._reply(o.id);
        break;
      case 'error': {
        const e = new FanoutdError(o.code ?? '', o.message ?? '', { id: o.id });
        if (e.code === 'taken_over') return e;
        const id = o.id ?? '';
        if (id.startsWith('snap:')) this._tr.snapshotRefused(id.slice(5));
        else this._reply(id, e);
        break;
      }
      case 'notice':
        this._tr.notice(o);
        await this._flush();
        break;
      default: {
        const fresh = this._tr.data(o);
        await this._flush(fresh && this.onMessage ? o : undefined);
      }
    }
    return undefined;
  }

  _reply(id, err) {
    const l = this._waiters.get(id);
    if (!l) return;
    this._waiters.delete(id);
    for (const e of l) {
      if (err) {
        for (const s of e.streams) {
          this._want = this._want.filter((x) => x !== s);
          this._tr.remove(s);
        }
        e.reject(err);
      } else {
        e.resolve();
      }
    }
  }
}
