// The scenario suite (clients/scenarios/*.json) against a real fanoutd.
// Uses $FANOUTD_BIN, else builds ./cmd/fanoutd with go (skipped without go).

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

import WS from 'ws';

import { Client, FanoutdError, Reason, VALID } from '../src/index.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const DIR = path.join(ROOT, 'clients', 'scenarios');
const FILES = fs.readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();

let bin;
function fanoutdBin() {
  if (process.env.FANOUTD_BIN) return process.env.FANOUTD_BIN;
  if (!bin) {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'fanoutd-js-'));
    bin = path.join(d, 'fanoutd');
    execFileSync('go', ['build', '-o', bin, './cmd/fanoutd'], { cwd: ROOT, stdio: 'inherit' });
  }
  return bin;
}

function haveGo() {
  try { execFileSync('go', ['version']); return true; } catch { return false; }
}

function gzipComment(file) {
  const b = fs.readFileSync(file);
  const flg = b[3];
  let i = 10;
  if (flg & 4) i += 2 + b.readUInt16LE(i);
  if (flg & 8) i = b.indexOf(0, i) + 1;
  if (flg & 16) return b.subarray(i, b.indexOf(0, i)).toString();
  return '';
}

function writeFaulted(src, dst, faults) {
  fs.writeFileSync(`${dst}.meta.json`, gzipComment(src));
  const lines = zlib.gunzipSync(fs.readFileSync(src)).toString().split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const f of [...faults].sort((a, b) => b.line - a.line)) {
    const i = f.line - 1;
    if (f.kind === 'drop') lines.splice(i, 1);
    else if (f.kind === 'blank') lines.splice(i, 0, '');
    else if (f.kind === 'regex') {
      const re = new RegExp(f.pattern);
      const m = re.exec(lines[i]);
      assert.ok(m, `line ${f.line}: ${f.pattern} does not match`);
      lines[i] = lines[i].slice(0, m.index) + f.repl + lines[i].slice(m.index + m[0].length);
    } else throw new Error(`unknown fault ${f.kind}`);
  }
  fs.writeFileSync(dst, `${lines.join('\n')}\n`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond, timeoutS, what) {
  const deadline = Date.now() + timeoutS * 1000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutS}s waiting for ${what}`);
    await sleep(10);
  }
}

function subsequence(got, want) {
  let i = 0;
  for (const g of got) if (i < want.length && g === want[i]) i++;
  return i === want.length;
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Rec is one client and what its handler saw.
class Rec {
  constructor(token) {
    this.token = token;
    this.states = new Map();
    this.notices = [];
    this.gaps = [];
    this.events = new Map();
    this.epoch = 0;
    this.connects = 0;
    this.disconnects = 0;
    this.lastRead = new Map();
    this.dropLast = new Map();
    this.pauseUntil = 0;
    this.targets = new Map();
    this.captured = new Map();
  }

  handle(m) {
    const d = this.pauseUntil - Date.now();
    if (d > 0) return sleep(d).then(() => this.record(m)); // the client stops reading
    this.record(m);
    return undefined;
  }

  record(m) {
    switch (m.type) {
      case 'book_state': {
        const l = this.states.get(m.stream) ?? [];
        l.push(m.state === VALID ? 'valid' : m.reason);
        this.states.set(m.stream, l);
        break;
      }
      case 'notice': this.notices.push(m); break;
      case 'gap': this.gaps.push({ g: m, epoch: this.epoch }); break;
      case 'connected': this.connects++; break;
      case 'disconnected':
        this.disconnects++;
        this.dropLast = this.lastRead;
        this.lastRead = new Map();
        this.epoch++;
        break;
      case 'book': {
        const l = this.events.get(m.stream) ?? [];
        l.push([m.seq, !!m.snapshot, this.epoch]);
        this.events.set(m.stream, l);
        this.lastRead.set(m.stream, m.seq);
        if (this.targets.get(m.stream) === m.seq) {
          const b = this.c.book(m.stream);
          if (b && b.seq === m.seq) {
            this.captured.set(m.stream, b.snapshot());
            this.targets.delete(m.stream);
          }
        }
        break;
      }
      default:
    }
  }
}

class Run {
  // ports: the daemon's (the ingest's in a cluster), then NATS's and each
  // edge's for a cluster scenario (daemon.cluster).
  constructor(sc, tmp, ports) {
    this.sc = sc;
    this.dir = tmp;
    this.addr = `127.0.0.1:${ports[0]}`;
    this.clients = new Map();
    this.holds = [];
    this.log = [];
    const d = sc.daemon;
    const cfg = path.join(tmp, 'fanoutd.yaml');
    let config = d.config || '';
    const role = [];
    this.edges = [];
    if (d.cluster) {
      // The ingest: the venues, the embedded NATS server, and its
      // generated credentials in the scenario's directory.
      this.natsURL = `nats://127.0.0.1:${ports[1]}`;
      for (let i = 0; i < d.cluster.edges; i++) this.edges.push({ addr: `127.0.0.1:${ports[2 + i]}` });
      role.push('--role', 'ingest', '--embedded-nats', '--nats', this.natsURL);
      config += `cluster:\n  nats_dir: ${path.join(tmp, 'nats')}\n  node: ingest\n`;
    }
    fs.writeFileSync(cfg, config || '{}\n');
    this.args = [d.command, '--listen', this.addr, '--config', cfg, ...role, ...(d.args ?? [])];
    d.captures.forEach((c, i) => {
      const src = path.join(ROOT, c.path);
      if (!c.faults?.length) { this.args.push(src); return; }
      const dst = path.join(tmp, `fault${i}-${path.basename(src, '.gz')}`);
      writeFaulted(src, dst, c.faults);
      this.args.push(dst);
    });
  }

  get url() { return this.urls[0]; }

  // What a client connects to: the daemon, or every edge.
  get urls() {
    if (this.edges.length) return this.edges.map((e) => `ws://${e.addr}/v1/stream`);
    return [`ws://${this.addr}/v1/stream`];
  }

  // startEdges starts every edge with the ingest's generated edge token
  // and waits until each is ready.
  async startEdges() {
    const tokenFile = path.join(this.dir, 'nats', 'edge.token');
    const read = () => { try { return fs.readFileSync(tokenFile, 'utf8').trim(); } catch { return ''; } };
    await waitFor(() => read() !== '', 30, "the ingest's edge token");
    const cfg = path.join(this.dir, 'edge.yaml');
    fs.writeFileSync(cfg, this.sc.daemon.cluster.edge_config);
    const env = { ...process.env, FANOUTD_NATS_TOKEN: read() };
    for (const e of this.edges) {
      e.proc = spawn(fanoutdBin(), ['serve', '--role', 'edge', '--nats', this.natsURL, '--listen', e.addr, '--config', cfg],
        { stdio: ['ignore', 'pipe', 'pipe'], env });
      e.exited = new Promise((r) => e.proc.once('exit', r));
      e.proc.stdout.on('data', (b) => this.log.push(b.toString()));
      e.proc.stderr.on('data', (b) => this.log.push(b.toString()));
    }
    for (const e of this.edges) {
      const deadline = Date.now() + 30000;
      for (;;) {
        let ok = false;
        try { ok = (await fetch(`http://${e.addr}/readyz`)).status === 200; } catch { ok = false; }
        if (ok) break;
        if (Date.now() > deadline) throw new Error("the edge's /readyz is not ready");
        await sleep(20);
      }
    }
  }

  async killEdge(name) {
    const i = Number(name.slice(4));
    assert.ok(name.startsWith('edge') && i >= 1 && i <= this.edges.length, `no node ${name}`);
    const e = this.edges[i - 1];
    if (e.proc) {
      e.proc.kill('SIGKILL');
      await e.exited;
      e.proc = undefined;
    }
  }

  async start() {
    this.proc = spawn(fanoutdBin(), this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((r) => this.proc.once('exit', r));
    this.proc.stdout.on('data', (b) => this.log.push(b.toString()));
    this.proc.stderr.on('data', (b) => this.log.push(b.toString()));
    let up = false;
    const poll = async () => {
      try { up = (await fetch(`http://${this.addr}/healthz`)).status === 200; } catch { up = false; }
    };
    const deadline = Date.now() + 30000;
    while (!up) {
      if (Date.now() > deadline) throw new Error('the daemon did not answer /healthz');
      await poll();
      if (!up) await sleep(20);
    }
    if (this.edges.length) await this.startEdges();
  }

  async kill() {
    if (this.proc) {
      this.proc.kill('SIGKILL');
      await this.exited;
      this.proc = undefined;
    }
  }

  async close() {
    for (const c of this.clients.values()) await c.c.close();
    for (const h of this.holds) h.terminate();
    await this.kill();
    for (let i = 0; i < this.edges.length; i++) await this.killEdge(`edge${i + 1}`);
  }

  async match(c, stream, timeoutS) {
    const [v, , ...sym] = stream.split(':');
    const deadline = Date.now() + timeoutS * 1000;
    while (Date.now() < deadline) {
      const r = await fetch(`http://${this.addr}/v1/books/${v}/${sym.join(':')}`, { headers: c.token ? { Authorization: `Bearer ${c.token}` } : {} });
      assert.equal(r.status, 200, `GET /v1/books: ${r.status}`);
      const d = await r.json();
      const b = c.c.book(stream);
      let got;
      if (b.seq === d.seq) got = b.snapshot();
      else if (b.seq < d.seq) {
        c.targets.set(stream, d.seq);
        c.captured.delete(stream);
        try {
          await waitFor(() => c.captured.has(stream), 5, "the client at the daemon's seq");
          got = c.captured.get(stream);
        } catch { /* passed it: read again */ }
      }
      if (!got) continue;
      // A fresh loss, announced and marked: read again once it is repaired.
      if (got.state !== VALID && (got.reason === Reason.DROPPING || got.reason === Reason.GAP)) continue;
      assert.ok(got.state === VALID || got.reason === Reason.LINK_DOWN, `${stream}: book at seq ${got.seq} is ${got.state} (${got.reason})`);
      assert.deepEqual([got.bids, got.asks], [d.bids, d.asks], `${stream}: book at seq ${d.seq} differs from /v1/books`);
      return;
    }
    throw new Error(`${stream}: never caught the client's book at the daemon's seq`);
  }

  async step(s) {
    const name = s.client ?? 'main';
    const timeout = s.timeout_s ?? 60;
    const c = this.clients.get(name);
    switch (s.op) {
      case 'start': await this.start(); break;
      case 'kill':
        if (s.node?.startsWith('edge')) {
          const before = new Map([...this.clients].map(([n, r]) => [n, r.disconnects]));
          await this.killEdge(s.node);
          for (const [n, r] of this.clients) await waitFor(() => r.disconnects > before.get(n), timeout, `${n} to lose its connection`);
        } else await this.kill();
        break;
      case 'hold': {
        const ws = new WS(this.url, { headers: s.token ? { Authorization: `Bearer ${s.token}` } : {} });
        await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
        ws.send(JSON.stringify({ op: 'subscribe', id: 'hold', streams: s.streams }));
        ws.pause(); // never read
        ws.on('error', () => {});
        this.holds.push(ws);
        break;
      }
      case 'connect': {
        const r = new Rec(s.token);
        r.c = new Client({ urls: this.urls, token: s.token, name: s.name, onMessage: (m) => r.handle(m), minBackoff: 50, maxBackoff: 1000 });
        r.c.start().catch(() => {});
        this.clients.set(name, r);
        break;
      }
      case 'subscribe':
        for (const st of s.streams) if (!c.states.has(st)) c.states.set(st, ['subscribing']);
        if (s.error) {
          await assert.rejects(c.c.subscribe(...s.streams), (e) => e instanceof FanoutdError && e.code === s.error);
        } else {
          await c.c.subscribe(...s.streams);
        }
        break;
      case 'notice':
        await waitFor(() => {
          if (!s.streams?.length) return c.notices.filter((x) => x.kind === s.kind && (!s.venue || x.venue === s.venue)).length >= (s.count ?? 1);
          return s.streams.every((st) => c.notices.some((x) => x.kind === s.kind && x.stream === st));
        }, timeout, `notice ${s.kind}`);
        break;
      case 'valid':
        await waitFor(() => s.streams.every((st) => c.c.book(st)?.valid), timeout, 'valid books');
        break;
      case 'states':
        try {
          await waitFor(() => subsequence(c.states.get(s.stream) ?? [], s.sequence), timeout, `states ${s.sequence}`);
        } catch (e) {
          throw new Error(`${e.message} (went through ${(c.states.get(s.stream) ?? []).slice(-30)})`);
        }
        break;
      case 'pause': c.pauseUntil = Date.now() + s.seconds * 1000; break;
      case 'match_daemon':
        for (let i = 0; i < (s.times ?? 1); i++) for (const st of s.streams) await this.match(c, st, timeout);
        break;
      case 'no_duplicates':
        for (const [st, evs] of c.events) {
          let last = 0;
          for (const [seq, snap] of evs) {
            if (snap) { if (seq < last) last = 0; last = Math.max(last, seq); continue; }
            assert.ok(seq > last, `${st}: seq ${seq} handed out after ${last}`);
            last = seq;
          }
        }
        break;
      case 'drop': {
        const n = c.disconnects;
        c.c.reconnect();
        await waitFor(() => c.disconnects > n, timeout, 'the drop');
        break;
      }
      case 'gap_exact': {
        const info = {};
        await waitFor(() => {
          const ep = c.epoch;
          const evs = (c.events.get(s.stream) ?? []).filter(([, , e]) => e === ep);
          if (evs.length > 0 && c.c.book(s.stream).valid) { info.epoch = ep; info.first = evs[0]; return true; }
          return false;
        }, timeout, 'the book valid after the reattach');
        const last = c.dropLast.get(s.stream) ?? 0;
        const got = c.gaps.filter((x) => x.epoch === info.epoch && x.g.stream === s.stream).map((x) => [x.g.first, x.g.last]);
        const [seq, snap] = info.first;
        const end = snap ? seq : seq - 1; // a snapshot stands for the seqs up to its own
        const want = end > last ? [[last + 1, end]] : [];
        assert.deepEqual(got, want, `gaps after the reattach (last read ${last}, first event ${info.first})`);
        break;
      }
      case 'fatal': {
        const e = await Promise.race([c.c.waitClosed(), sleep(timeout * 1000).then(() => undefined)]);
        assert.ok(e instanceof FanoutdError && e.code === s.code, `run ended with ${e}`);
        if (s.http) assert.equal(e.httpStatus, s.http);
        assert.ok(c.connects === 0 && c.disconnects === 1, `${c.connects} connections, ${c.disconnects} attempts`);
        break;
      }
      case 'connected':
        assert.ok(c.connects === 1 && c.disconnects === 0, `${c.connects} connections, ${c.disconnects} disconnects`);
        break;
      default: throw new Error(`unknown op ${s.op}`);
    }
  }
}

const skip = !process.env.FANOUTD_BIN && !haveGo() ? 'no FANOUTD_BIN and no go to build fanoutd' : false;

test('the suite is complete', () => assert.ok(FILES.length >= 6));

for (const f of FILES) {
  const sc = JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8'));
  test(`scenario ${f}`, { skip, timeout: 600000 }, async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fanoutd-scn-'));
    const ports = [await freePort()];
    if (sc.daemon.cluster) for (let i = 0; i <= sc.daemon.cluster.edges; i++) ports.push(await freePort());
    const run = new Run(sc, tmp, ports);
    try {
      for (const [i, s] of sc.steps.entries()) {
        try {
          await run.step(s);
        } catch (e) {
          e.message = `step ${i + 1} (${s.op}): ${e.message}\ndaemon log:\n${run.log.join('').slice(-3000)}`;
          throw e;
        }
      }
    } finally {
      await run.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
}
