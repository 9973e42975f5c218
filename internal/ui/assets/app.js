// fanoutd's operator page. Plain script, no dependencies, no build step.
// It reads the daemon's routes with the token kept in sessionStorage (sent
// as Authorization: Bearer) and a stream over the websocket API (the token
// as ?token= on that one request, as browsers cannot set its headers).
'use strict';
(() => {
  const $ = (sel) => document.querySelector(sel);
  const TOKEN_KEY = 'fanoutd.token';
  const TOP = 20; // book levels shown as text, per side
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  let askedForToken = false;

  // ---- helpers ----
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  function fmtAge(ms) {
    if (!isFinite(ms)) return '–';
    if (ms < 0) ms = 0;
    if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + 'm ' + String(s % 60).padStart(2, '0') + 's';
    const h = Math.floor(m / 60);
    return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  }
  function fmtTime(iso) {
    const d = new Date(iso);
    return isNaN(d) ? '' : d.toISOString().slice(11, 23);
  }
  function setStatus(msg, isError) {
    const s = $('#status');
    s.textContent = msg || '';
    s.classList.toggle('error', !!isError);
  }
  async function getJSON(path) {
    const headers = {};
    if (token) headers.Authorization = 'Bearer ' + token;
    const r = await fetch(path, { headers, cache: 'no-store' });
    if (r.status === 401 || r.status === 403) {
      setStatus(token ? 'The token was refused (' + r.status + '): type another above.' : 'This daemon needs a token: type it in above.', true);
      if (!askedForToken) { askedForToken = true; $('#token-input').focus(); }
      throw new Error('auth');
    }
    if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
    return r.json();
  }
  // patch makes tbody's rows those of rows (keyed by the data attribute
  // key), keeping each row and cell that did not change: a link or button
  // the keyboard focused survives the once-a-second refresh.
  function patch(tbody, rows, key) {
    const old = new Map([...tbody.rows].map((r) => [r.dataset[key], r]));
    rows.forEach((nr, i) => {
      let r = old.get(nr.dataset[key]);
      if (!r) r = nr;
      else {
        old.delete(nr.dataset[key]);
        for (const a of [...r.attributes]) if (!nr.hasAttribute(a.name)) r.removeAttribute(a.name);
        for (const a of [...nr.attributes]) if (r.getAttribute(a.name) !== a.value) r.setAttribute(a.name, a.value);
        if (r.cells.length !== nr.cells.length) r.replaceChildren(...nr.childNodes);
        else [...nr.cells].forEach((c, j) => { if (r.cells[j].outerHTML !== c.outerHTML) r.replaceChild(c, r.cells[j]); });
      }
      if (tbody.rows[i] !== r) tbody.insertBefore(r, tbody.rows[i] || null);
    });
    for (const r of old.values()) r.remove();
  }
  function poll(fn, every) {
    let busy = false;
    const run = async () => {
      if (busy) return;
      busy = true;
      try { await fn(); } catch (e) { if (e.message !== 'auth') setStatus(String(e.message || e), true); } finally { busy = false; }
    };
    run();
    return setInterval(run, every);
  }

  // ---- token ----
  $('#token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    token = $('#token-input').value.trim();
    $('#token-input').value = '';
    if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
    askedForToken = false;
    setStatus(token ? 'Token kept for this tab.' : '');
    refreshAll();
    if (view) view.reconnect();
  });
  $('#token-forget').addEventListener('click', () => {
    token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    setStatus('Token forgotten.');
    if (view) view.reconnect();
  });

  // ---- venues (/v1/coverage) ----
  const prevEvents = new Map(); // stream -> {events, at}
  async function venues() {
    const list = await getJSON('/v1/coverage');
    const now = Date.now();
    const vt = $('#venue-table tbody');
    const st = $('#stream-table tbody');
    const hasLeader = list.some((c) => c.leader !== undefined);
    document.querySelectorAll('.leader').forEach((c) => { c.hidden = !hasLeader; });
    // A replay's ages are on its clock (the captures' receive times); a
    // link that is not up is down since its first failure, for c.error.
    const clockOf = (c) => (c.clock ? Date.parse(c.clock) : now);
    const setAt = (t) => t && !t.startsWith('0001');
    patch(vt, list.map((c) => el('tr', { 'data-venue': c.venue, 'data-link': c.link },
      el('th', { scope: 'row', text: c.venue }),
      el('td', {}, el('span', { class: 'badge link-' + c.link, text: c.link }),
        c.error ? el('span', { class: 'link-error', text: ' ' + c.error }) : null),
      setAt(c.down_since)
        ? el('td', { title: c.down_since, text: 'down for ' + fmtAge(clockOf(c) - Date.parse(c.down_since)) })
        : el('td', { title: c.since, text: setAt(c.since) ? fmtAge(clockOf(c) - Date.parse(c.since)) + ' ago' : '–' }),
      el('td', { class: 'num', text: c.resyncs }),
      el('td', { class: 'num', text: c.streams.length }),
      hasLeader ? el('td', { class: 'leader', text: c.leader || '–' }) : null)), 'venue');
    const rows = [];
    const names = [];
    for (const c of list) {
      for (const s of c.streams) {
        names.push(s.stream);
        const prev = prevEvents.get(s.stream);
        let rate;
        if (prev && now > prev.at) rate = (s.events - prev.events) * 1000 / (now - prev.at);
        else {
          const span = Date.parse(s.last_event) - Date.parse(s.since);
          rate = span > 0 ? (s.events - 1) * 1000 / span : 0;
        }
        prevEvents.set(s.stream, { events: s.events, at: now });
        rows.push(el('tr', { 'data-stream': s.stream },
          el('th', { scope: 'row' }, el('a', { href: '/?stream=' + encodeURIComponent(s.stream), text: s.stream })),
          el('td', { class: 'num', text: fmtAge(clockOf(c) - Date.parse(s.last_event)) }),
          el('td', { class: 'num', text: (rate < 10 ? rate.toFixed(1) : Math.round(rate)) + '/s' }),
          el('td', { class: 'num', text: s.events })));
      }
    }
    patch(st, rows, 'stream');
    const dl = $('#stream-list');
    if (dl.children.length !== names.length) dl.replaceChildren(...names.map((n) => el('option', { value: n })));
    if (!$('#status').classList.contains('error') || $('#status').textContent.includes('HTTP')) setStatus('');
  }

  // ---- subscribers (/v1/subscribers) ----
  let subs = [];
  const sort = { key: 'dropping', dir: -1 };
  function bound(s) {
    let b = Infinity;
    for (const v of Object.values(s.bounds || {})) if (v.max_queue_len > 0) b = Math.min(b, v.max_queue_len);
    return b === Infinity ? 0 : b;
  }
  function sortValue(s, key) {
    switch (key) {
      case 'streams': return s.streams.length;
      case 'fill': { const b = bound(s); return b ? s.queue_len / b : 0; }
      case 'attached': case 'dropping': return s[key] ? 1 : 0;
      default: return s[key];
    }
  }
  function renderSubs() {
    const key = sort.key, dir = sort.dir;
    const list = subs.slice().sort((a, b) => {
      const x = sortValue(a, key), y = sortValue(b, key);
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    });
    document.querySelectorAll('#sub-table th[data-key]').forEach((th) => {
      if (th.dataset.key === key) th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending'); else th.removeAttribute('aria-sort');
    });
    $('#sub-count').textContent = '(' + subs.length + ')';
    patch($('#sub-table tbody'), list.map((s) => {
      const b = bound(s);
      const pct = b ? Math.min(100, 100 * s.queue_len / b) : 0;
      const bar = el('span', { class: 'fill' + (pct >= 100 ? ' full' : ''), role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': b, 'aria-valuenow': s.queue_len, 'aria-label': 'queue ' + s.queue_len + ' of ' + b });
      const fill = el('span');
      fill.style.width = pct.toFixed(1) + '%'; // CSSOM, not a style attribute: the page's CSP forbids inline styles
      bar.append(fill);
      return el('tr', { 'data-id': s.id, 'data-dropping': s.dropping ? 'true' : 'false' },
        el('th', { scope: 'row', text: s.id }),
        el('td', { text: s.kind }),
        el('td', { text: s.attached ? 'yes' : 'no' }),
        el('td', { class: 'num', title: s.streams.join('\n'), text: s.streams.length === 1 ? s.streams[0] : s.streams.length }),
        el('td', {}, bar, ' ', el('span', { class: 'num', text: s.queue_len + ' / ' + b })),
        el('td', {}, s.dropping ? el('span', { class: 'badge dropping', text: 'dropping' }) : 'no'),
        el('td', { class: 'num', text: s.dropped_total }),
        el('td', { class: 'num', text: s.replaced_total || 0 }));
    }), 'id');
  }
  document.querySelectorAll('#sub-table th[data-key] button').forEach((b) => b.addEventListener('click', () => {
    const key = b.parentElement.dataset.key;
    if (sort.key === key) sort.dir = -sort.dir; else { sort.key = key; sort.dir = key === 'id' || key === 'kind' ? 1 : -1; }
    renderSubs();
  }));
  async function subscribers() { subs = await getJSON('/v1/subscribers'); renderSubs(); }

  // ---- claim check (/v1/claimcheck/stats) ----
  async function claimcheck() {
    // The statistics are node-wide: a token with scopes is refused them
    // (403), and the panel is hidden rather than the token reported bad.
    const headers = {};
    if (token) headers.Authorization = 'Bearer ' + token;
    const probe = await fetch('/v1/claimcheck/stats', { headers, cache: 'no-store' });
    $('#claimcheck').hidden = probe.status === 403;
    if (probe.status === 403) return;
    const s = probe.ok ? await probe.json() : await getJSON('/v1/claimcheck/stats');
    $('#store-table tbody').replaceChildren(...(s.stores || []).map((x) => el('tr', { 'data-store': x.name },
      el('th', { scope: 'row', text: x.name }),
      ...[x.limit, x.ceiling, x.inflight, x.queued, x.requests, x.throttled, x.wasted].map((v) => el('td', { class: 'num', text: v })),
      el('td', { class: 'num', text: (x.srtt_ms || 0).toFixed(1) + ' ms' }))));
    const r = s.reads || {}, g = s.gate || {}, c = s.cache || {};
    const kv = [
      ['reads', `store ${r.store}, coalesced ${r.coalesced}, cache ${r.cache}, shed ${r.shed}`],
      ['gate', `${g.inflight} in flight of ${g.max || '∞'}, ${g.rejected} rejected`],
      ['cache', `${c.bytes} of ${c.max_bytes} bytes, ${c.entries} entries`],
    ];
    $('#claim-summary').replaceChildren(...kv.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]));
  }

  function refreshAll() { /* the pollers run on their own; this only clears a stale error */ setStatus(''); }

  // ---- one stream, over the websocket API ----
  let view = null;
  class StreamView {
    constructor(stream) {
      const parts = stream.split(':');
      this.stream = stream;
      this.venue = parts[0];
      this.channel = parts[1] || '';
      this.symbol = parts.slice(2).join(':');
      this.trades = this.channel === 'level2' ? this.venue + ':trades:' + this.symbol : this.channel === 'trades' ? stream : '';
      this.bids = new Map(); this.asks = new Map();
      this.seq = 0; this.valid = false; this.isBook = false;
      this.snapshots = 0; this.updates = 0; // books applied, for the curious and the tests
      this.lastTrades = [];
      this.backoff = 500;
      this.dirty = false;
      $('#stream').hidden = false;
      $('#stream-name').textContent = stream;
      $('#stream-input').value = stream;
      document.title = stream + ' · fanoutd';
      if (!this.trades) $('#last-title').textContent = 'Last event';
      this.connect();
    }
    reconnect() { if (this.ws) this.ws.close(); else this.connect(); }
    connect() {
      const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const url = proto + '//' + location.host + '/v1/stream' + (token ? '?token=' + encodeURIComponent(token) : '');
      const ws = new WebSocket(url);
      this.ws = ws;
      $('#ws-state').textContent = 'connecting';
      ws.onopen = () => {
        this.backoff = 500;
        $('#ws-state').textContent = 'connected';
        ws.send(JSON.stringify({ op: 'subscribe', id: 'stream', streams: [this.stream] }));
        if (this.trades && this.trades !== this.stream) ws.send(JSON.stringify({ op: 'subscribe', id: 'trades', streams: [this.trades] }));
      };
      ws.onmessage = (m) => {
        for (const line of String(m.data).split('\n')) {
          if (!line) continue;
          let o;
          try { o = JSON.parse(line); } catch { continue; }
          this.handle(o);
        }
        this.schedule();
      };
      ws.onclose = (e) => {
        if (this.ws !== ws) return;
        this.ws = null;
        this.valid = false;
        $('#ws-state').textContent = 'disconnected (' + e.code + (e.reason ? ' ' + e.reason : '') + '), retrying';
        this.schedule();
        setTimeout(() => this.connect(), this.backoff);
        this.backoff = Math.min(this.backoff * 2, 5000);
      };
    }
    handle(o) {
      switch (o.type) {
        case 'book':
          if (o.stream !== this.stream) return;
          this.isBook = true;
          if (o.snapshot) {
            this.bids.clear(); this.asks.clear(); this.valid = true;
          } else if (!this.valid) {
            return; // no snapshot yet: nothing to apply to
          } else if (o.seq !== this.seq + 1) {
            this.valid = false; // a hole: fanoutd announces it and sends a snapshot
            this.seq = o.seq;
            return;
          }
          for (const [p, s] of o.bids || []) { if (Number(s) === 0) this.bids.delete(p); else this.bids.set(p, s); }
          for (const [p, s] of o.asks || []) { if (Number(s) === 0) this.asks.delete(p); else this.asks.set(p, s); }
          this.seq = o.seq;
          if (o.snapshot) this.snapshots++; else this.updates++;
          return;
        case 'trade':
          if (o.stream !== this.trades && o.stream !== this.stream) return;
          this.lastTrades.unshift(o);
          if (this.lastTrades.length > 25) this.lastTrades.length = 25;
          if (o.stream === this.stream) this.seq = o.seq;
          return;
        case 'notice':
          if (o.stream === this.stream || o.stream === this.trades || (!o.stream && (!o.venue || o.venue === this.venue))) this.notice(o);
          return;
        case 'error':
          this.notice({ kind: 'error', severity: 'warning', at: new Date().toISOString(), message: (o.id ? o.id + ': ' : '') + o.code + ': ' + o.message });
          return;
        case 'ack': case 'pong':
          return;
        default:
          if (o.stream === this.stream) { this.seq = o.seq; this.last = o; }
      }
    }
    notice(n) {
      const li = el('li', { 'data-kind': n.kind },
        el('span', { class: 'badge sev-' + (n.severity || 'info'), text: n.kind }), ' ',
        el('time', { datetime: n.at, text: fmtTime(n.at) }), ' ',
        n.stream ? el('code', { text: n.stream }) : null, ' ',
        n.message || '',
        n.details ? el('code', { text: ' ' + JSON.stringify(n.details) }) : null);
      const ol = $('#notices');
      ol.prepend(li);
      while (ol.children.length > 100) ol.lastChild.remove();
    }
    schedule() {
      if (this.dirty) return;
      this.dirty = true;
      setTimeout(() => { this.dirty = false; this.render(); }, 50);
    }
    sides() {
      const bids = [...this.bids].sort((a, b) => Number(b[0]) - Number(a[0]));
      const asks = [...this.asks].sort((a, b) => Number(a[0]) - Number(b[0]));
      return { bids, asks };
    }
    render() {
      const seqEl = $('#seq');
      seqEl.textContent = this.seq || '–';
      seqEl.dataset.seq = this.seq;
      $('#book-state').textContent = this.isBook ? (this.valid ? this.bids.size + ' bids, ' + this.asks.size + ' asks' : 'waiting for a snapshot') : '';
      $('#book-panel').hidden = !this.isBook;
      $('#depth').parentElement.hidden = !this.isBook;
      if (this.isBook) {
        const { bids, asks } = this.sides();
        $('#book-bids tbody').replaceChildren(...bids.slice(0, TOP).map(([p, s]) => el('tr', { 'data-price': p, 'data-size': s }, el('td', { text: s }), el('td', { class: 'px', text: p }))));
        $('#book-asks tbody').replaceChildren(...asks.slice(0, TOP).map(([p, s]) => el('tr', { 'data-price': p, 'data-size': s }, el('td', { class: 'px', text: p }), el('td', { text: s }))));
        drawDepth($('#depth'), bids.slice(0, 100), asks.slice(0, 100));
      }
      $('#trades').hidden = !this.trades;
      if (this.trades) {
        $('#trades tbody').replaceChildren(...this.lastTrades.map((t) => el('tr', {},
          el('td', { text: fmtTime(t.venue_time || t.recv_time) }),
          el('td', { class: 'side-' + t.side, text: t.side || '?' }),
          el('td', { class: 'num', text: t.price }), el('td', { class: 'num', text: t.size }), el('td', { class: 'num', text: t.seq }))));
      }
      const le = $('#last-event');
      le.hidden = !this.last;
      if (this.last) le.textContent = JSON.stringify(this.last, null, 1);
    }
    // state returns the page's book in full, for the browser tests and the
    // curious: what the page shows is the top of this.
    state() {
      const { bids, asks } = this.sides();
      return { stream: this.stream, seq: this.seq, valid: this.valid, snapshots: this.snapshots, updates: this.updates, bids, asks };
    }
  }

  function drawDepth(canvas, bids, asks) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 600, h = canvas.clientHeight || 260;
    if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue('--muted').trim(), bidC = css.getPropertyValue('--bid').trim(), askC = css.getPropertyValue('--ask').trim();
    if (!bids.length && !asks.length) return;
    const cum = (side) => { let t = 0; return side.map(([p, s]) => [Number(p), (t += Number(s))]); };
    const b = cum(bids), a = cum(asks);
    const lo = b.length ? b[b.length - 1][0] : a[0][0];
    const hi = a.length ? a[a.length - 1][0] : b[0][0];
    const top = Math.max(b.length ? b[b.length - 1][1] : 0, a.length ? a[a.length - 1][1] : 0) || 1;
    const pad = { l: 8, r: 8, t: 8, b: 20 };
    const x = (p) => hi > lo ? pad.l + (p - lo) / (hi - lo) * (w - pad.l - pad.r) : w / 2;
    const y = (v) => h - pad.b - v / top * (h - pad.t - pad.b);
    const area = (pts, color) => {
      if (!pts.length) return;
      ctx.beginPath();
      ctx.moveTo(x(pts[0][0]), y(0));
      let prev = 0;
      for (const [p, v] of pts) { ctx.lineTo(x(p), y(prev)); ctx.lineTo(x(p), y(v)); prev = v; }
      ctx.lineTo(x(pts[pts.length - 1][0]), y(0));
      ctx.closePath();
      ctx.globalAlpha = 0.25; ctx.fillStyle = color; ctx.fill();
      ctx.globalAlpha = 1; ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.stroke();
    };
    area(b, bidC);
    area(a, askC);
    ctx.fillStyle = fg;
    ctx.font = '11px ui-monospace, monospace';
    ctx.textBaseline = 'bottom';
    ctx.textAlign = 'left'; ctx.fillText(String(lo), pad.l, h - 2);
    ctx.textAlign = 'right'; ctx.fillText(String(hi), w - pad.r, h - 2);
    ctx.textAlign = 'center';
    if (b.length && a.length) ctx.fillText(bids[0][0] + ' | ' + asks[0][0], w / 2, h - 2);
    ctx.textAlign = 'right'; ctx.textBaseline = 'top'; ctx.fillText('Σ ' + top.toPrecision(4), w - pad.r, pad.t);
  }

  $('#stream-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const s = $('#stream-input').value.trim();
    location.search = s ? '?stream=' + encodeURIComponent(s) : '';
  });

  const stream = new URLSearchParams(location.search).get('stream');
  if (stream) view = new StreamView(stream);
  window.fanoutdView = () => (view ? view.state() : null);

  poll(venues, 1000);
  poll(subscribers, 750);
  poll(claimcheck, 2000);
})();
