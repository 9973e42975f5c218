#!/usr/bin/env node
// Runs the tardis-dev library offline on a fanoutd capture: the capture is
// laid out as tardis-dev's local cache (one gzip'ed slice per minute under
// cacheDir/feeds/<exchange>/<sha256 of the filters>/YYYY/MM/DD/HH/mm.json.gz,
// paths computed by tardis-dev's own helpers), so replayNormalized reads it
// from disk and never downloads. See docs/protocol.md (Derived streams) and docs/performance.md.
//
//   node run.js [flags] CAPTURE.jsonl.gz
//     --exchange E        tardis exchange id (default from the capture's venue:
//                         binance→binance, okx→okex, bybit→bybit-spot)
//     --symbols S[,S]     (default: the capture's subscriptions)
//     --cache DIR         cache directory (default: a temporary one, removed);
//                         a capture already laid out there is not laid out again
//     --prepare           only lay the capture out in --cache DIR and exit
//     --export            write every normalized message (book_change, trade),
//                         as fanoutd replay --export writes its events
//     --machine T[,T]     write what tardis-machine's /replay-normalized writes
//                         for dataTypes T (trade, book_change, quote,
//                         book_snapshot_<d>_<i>, trade_bar_<i>), disconnects
//                         included: its normalizers, computables, data-type
//                         filter and microsecond ISO times (src/helpers.ts)
//     --book-snapshot D_I computeBookSnapshots depth D, interval I (e.g. 10_100ms)
//     --quote             book_snapshot_1_0ms named quote (as tardis-machine does)
//     --trade-bar I       computeTradeBars kind time, interval I (e.g. 1s)
//     --time exchange|local  the timestamp the computables bucket by: tardis-dev's
//                         own (exchange, the default) or the receive time (local)
//   Computed messages are written one JSON object per line; timestamps as ISO
//   strings with microseconds.
'use strict'
const fs = require('fs')
const os = require('os')
const path = require('path')
const zlib = require('zlib')
const tardis = require('tardis-dev')
const handy = require('tardis-dev/dist/handy')
const { OkexV5BookChangeMapper } = require('tardis-dev/dist/mappers/okex')

const venueToExchange = { binance: 'binance', okx: 'okex', bybit: 'bybit-spot' }

function parseArgs(argv) {
  const a = { bookSnapshots: [], tradeBars: [], time: 'exchange' }
  for (let i = 0; i < argv.length; i++) {
    const f = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${f} needs a value`)
      return argv[++i]
    }
    switch (f) {
      case '--exchange': a.exchange = next(); break
      case '--symbols': a.symbols = next().split(','); break
      case '--cache': a.cache = next(); break
      case '--prepare': a.prepare = true; break
      case '--export': a.export = true; break
      case '--machine': a.machine = next().split(','); break
      case '--book-snapshot': a.bookSnapshots.push(next()); break
      case '--quote': a.quote = true; break
      case '--trade-bar': a.tradeBars.push(next()); break
      case '--time': a.time = next(); break
      default:
        if (f.startsWith('--')) throw new Error(`unknown flag ${f}`)
        if (a.capture) throw new Error('one capture only')
        a.capture = f
    }
  }
  if (!a.capture) throw new Error('usage: node run.js [flags] CAPTURE.jsonl.gz')
  if (a.time !== 'exchange' && a.time !== 'local') throw new Error('--time exchange|local')
  return a
}

function intervalMs(s) {
  const m = /^(\d+)(ms|s|m)$/.exec(s)
  if (!m) throw new Error(`bad interval ${s}`)
  return Number(m[1]) * { ms: 1, s: 1000, m: 60000 }[m[2]]
}

// gzipComment returns the FCOMMENT field of a gzip file's header (fanoutd's
// capture metadata), or undefined.
function gzipComment(buf) {
  if (buf[0] !== 0x1f || buf[1] !== 0x8b) return undefined
  const flg = buf[3]
  let i = 10
  if (flg & 4) i += 2 + buf.readUInt16LE(i)
  if (flg & 8) i = buf.indexOf(0, i) + 1
  if (!(flg & 16)) return undefined
  return buf.toString('latin1', i, buf.indexOf(0, i))
}

function readMeta(file) {
  const fd = fs.openSync(file, 'r')
  const head = Buffer.alloc(4096)
  fs.readSync(fd, head, 0, head.length, 0)
  fs.closeSync(fd)
  const c = gzipComment(head)
  return c ? JSON.parse(c) : {}
}

// The receive time of a capture line: its first 28 characters.
const minuteOf = (line) => {
  const d = new Date(line.toString('latin1', 0, 28))
  d.setUTCSeconds(0, 0)
  return d
}

// sliceDir is the directory tardis-dev's replay() reads the slices of
// exchange and filters from (its worker's layout).
function sliceDir(cacheDir, exchange, filters) {
  return path.join(cacheDir, 'feeds', exchange, handy.sha256(handy.optimizeFilters(filters)))
}

// layOut writes the capture's lines as one slice per minute in dir (a
// sliceDir), and returns the
// [from, to) minutes it covers. A disconnect (empty line) stays in the slice
// of the line before it.
function layOut(capture, dir) {
  const data = zlib.gunzipSync(fs.readFileSync(capture))
  const slices = new Map()
  let cur
  let start = 0
  for (let i = 0; i <= data.length; i++) {
    if (i < data.length && data[i] !== 0x0a) continue
    const line = data.subarray(start, i)
    start = i + 1
    if (line.length === 0 && i === data.length) break
    if (line.length > 0) {
      const key = minuteOf(line).toISOString()
      if (!slices.has(key)) slices.set(key, [])
      cur = slices.get(key)
    }
    if (cur !== undefined) cur.push(line, Buffer.from('\n'))
  }
  const keys = [...slices.keys()].sort()
  const from = new Date(keys[0])
  const to = handy.addMinutes(new Date(keys[keys.length - 1]), 1)
  for (let d = from; d < to; d = handy.addMinutes(d, 1)) {
    const p = path.join(dir, handy.formatDateToPath(d) + '.json.gz')
    fs.mkdirSync(path.dirname(p), { recursive: true })
    fs.writeFileSync(p, zlib.gzipSync(Buffer.concat(slices.get(d.toISOString()) || []), { level: 1 }))
  }
  return { from, to }
}

// layOutOnce lays the capture out unless its slice directory in cacheDir
// already holds this capture (same file, size and modification time), so a
// timed run with --cache DIR after --prepare --cache DIR measures tardis-dev
// alone. One directory holds one capture: tardis-dev's cache has one slice
// per exchange, filters and minute.
function layOutOnce(capture, cacheDir, exchange, filters) {
  const st = fs.statSync(capture)
  const key = JSON.stringify({ capture: path.resolve(capture), size: st.size, mtime: st.mtimeMs })
  const dir = sliceDir(cacheDir, exchange, filters)
  const index = path.join(dir, 'fanoutd-layout.json')
  try {
    const l = JSON.parse(fs.readFileSync(index, 'utf8'))
    if (l.key === key) return { from: new Date(l.from), to: new Date(l.to) }
  } catch (e) {}
  fs.rmSync(dir, { recursive: true, force: true })
  const r = layOut(capture, dir)
  fs.writeFileSync(index, JSON.stringify({ key, ...r }))
  return r
}

// iso formats a tardis-dev timestamp (a Date, with .μs when replayNormalized
// set it) with microseconds.
function iso(d) {
  if (!(d instanceof Date)) return d
  const s = d.toISOString()
  const us = d.μs !== undefined ? d.μs : 0
  return s.slice(0, 23) + String(us).padStart(3, '0') + 'Z'
}

function levels(ls) {
  return ls.filter((l) => l.price !== undefined).map((l) => [l.price, l.amount])
}

async function main() {
  const a = parseArgs(process.argv.slice(2))
  const meta = readMeta(a.capture)
  const exchange = a.exchange || venueToExchange[meta.venue]
  if (!exchange) throw new Error(`no tardis exchange for venue ${meta.venue}: pass --exchange`)
  const symbols = a.symbols || meta.subscriptions
  const normalizers = a.machine ? machineNormalizers(a.machine) : [tardis.normalizeBookChanges, tardis.normalizeTrades]
  if (exchange.startsWith('okex') && normalizers.includes(tardis.normalizeBookChanges)) {
    // fanoutd subscribes OKX's public "books" channel; tardis-dev's historical
    // okex mapper reads "books-l2-tbt" and its real-time one (no credentials)
    // "books": use that one, its own OkexV5BookChangeMapper.
    normalizers[normalizers.indexOf(tardis.normalizeBookChanges)] = (ex) => new OkexV5BookChangeMapper(ex, true)
  }

  let cacheDir = a.cache
  const tmp = cacheDir === undefined
  if (tmp) cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tardis-cache-'))
  // Offline: an unreachable endpoint, so a missing slice fails instead of downloading.
  tardis.init({ cacheDir, endpoint: 'http://127.0.0.1:9/v1' })

  // The filters replayNormalized derives (from mappers made at the first minute).
  const probe = new Date(new Date(readFirstTime(a.capture)).setUTCSeconds(0, 0))
  const filters = handy.getFilters(normalizers.map((n) => n(exchange, probe)), symbols)
  const { from, to } = layOutOnce(a.capture, cacheDir, exchange, filters)
  if (a.prepare) {
    process.stdout.write(JSON.stringify({ cacheDir, exchange, symbols, from, to }) + '\n')
    return
  }

  try {
    let messages = tardis.replayNormalized(
      { exchange, symbols, from: from.toISOString(), to: to.toISOString(), withDisconnectMessages: true },
      ...normalizers
    )
    const out = new Writer()
    if (a.machine) {
      for await (const m of machineMessages(messages, a.machine)) {
        out.write(JSON.stringify(m))
        if (out.blocked) await out.drain()
      }
      await out.end()
      return
    }
    if (a.export) {
      for await (const m of messages) {
        out.write(JSON.stringify(m))
        if (out.blocked) await out.drain()
      }
      await out.end()
      return
    }
    if (a.time === 'local') messages = withLocalTime(messages)
    const computables = [
      ...a.bookSnapshots.map((s) => {
        const [d, i] = s.split('_')
        return tardis.computeBookSnapshots({ depth: Number(d), interval: intervalMs(i), name: `book_snapshot_${s}` })
      }),
      ...(a.quote ? [tardis.computeBookSnapshots({ depth: 1, interval: 0, name: 'quote' })] : []),
      ...a.tradeBars.map((i) => tardis.computeTradeBars({ kind: 'time', interval: intervalMs(i), name: `trade_bar_${i}` }))
    ]
    for await (const m of tardis.compute(messages, ...computables)) {
      if (m.type === 'book_snapshot') {
        out.write(JSON.stringify({ type: m.type, name: m.name, symbol: m.symbol, timestamp: iso(m.timestamp), localTimestamp: iso(m.localTimestamp), bids: levels(m.bids), asks: levels(m.asks) }))
      } else if (m.type === 'trade_bar') {
        out.write(JSON.stringify({ ...m, timestamp: iso(m.timestamp), localTimestamp: iso(m.localTimestamp), openTimestamp: iso(m.openTimestamp), closeTimestamp: iso(m.closeTimestamp) }))
      } else if (m.type === 'disconnect') {
        out.write(JSON.stringify({ type: m.type, localTimestamp: iso(m.localTimestamp) }))
      }
      if (out.blocked) await out.drain()
    }
    await out.end()
  } finally {
    if (tmp) fs.rmSync(cacheDir, { recursive: true, force: true })
  }
}

// machineNormalizers are the normalizers tardis-machine's getNormalizers
// picks for dataTypes.
function machineNormalizers(dataTypes) {
  const out = []
  if (dataTypes.some((t) => t === 'trade' || t.startsWith('trade_bar_'))) out.push(tardis.normalizeTrades)
  if (dataTypes.some((t) => t === 'book_change' || t.startsWith('book_snapshot_') || t.startsWith('quote'))) out.push(tardis.normalizeBookChanges)
  return out
}

// machineMessages is tardis-machine's /replay-normalized over messages: the
// computables its getComputables builds for dataTypes (time bars, book
// snapshots and quotes with removeCrossedLevels), then its data-type filter
// (only the requested types, and disconnects), with timestamps written as
// its Date.prototype.toISOString override writes them (microseconds).
async function* machineMessages(messages, dataTypes) {
  const computables = []
  for (const t of dataTypes) {
    let m
    if ((m = /^trade_bar_(\d+)(ms|s|m)$/.exec(t))) {
      computables.push(tardis.computeTradeBars({ kind: 'time', interval: intervalMs(m[1] + m[2]), name: t }))
    } else if ((m = /^book_snapshot_(\d+)_(\d+(?:ms|s|m))$/.exec(t))) {
      computables.push(tardis.computeBookSnapshots({ depth: Number(m[1]), interval: intervalMs(m[2]), name: t, removeCrossedLevels: true }))
    } else if (t === 'quote') {
      computables.push(tardis.computeBookSnapshots({ depth: 1, interval: 0, name: t, removeCrossedLevels: true }))
    } else if (t !== 'trade' && t !== 'book_change') {
      throw new Error(`data type ${t}: not one of tardis-machine's the harness computes`)
    }
  }
  const wanted = new Set(dataTypes.map((t) => (t.startsWith('trade_bar_') ? 'trade_bar' : t.startsWith('book_snapshot_') || t === 'quote' ? 'book_snapshot' : t)))
  const toISO = Date.prototype.toISOString
  Date.prototype.toISOString = function () {
    const s = toISO.apply(this)
    return this.μs !== undefined ? s.slice(0, s.length - 1) + String(this.μs).padStart(3, '0') + 'Z' : s
  }
  for await (const m of computables.length > 0 ? tardis.compute(messages, ...computables) : messages) {
    if (m.type === 'disconnect' || wanted.has(m.type)) yield m
  }
}

// withLocalTime hands tardis-dev's computables the receive time as each
// message's timestamp, so they bucket by it as fanoutd does.
async function* withLocalTime(messages) {
  for await (const m of messages) {
    if (m.type !== 'disconnect') m.timestamp = m.localTimestamp
    yield m
  }
}

// readFirstTime returns the receive time of the capture's first line.
function readFirstTime(capture) {
  const fd = fs.openSync(capture, 'r')
  const buf = Buffer.alloc(64 * 1024)
  const n = fs.readSync(fd, buf, 0, buf.length, 0)
  fs.closeSync(fd)
  const head = zlib.gunzipSync(buf.subarray(0, n), { finishFlush: zlib.constants.Z_SYNC_FLUSH })
  return head.toString('latin1', 0, 28)
}

// Writer batches lines to stdout, honouring back-pressure.
class Writer {
  constructor() {
    this.buf = []
    this.size = 0
    this.pending = Promise.resolve()
  }
  write(s) {
    this.buf.push(s, '\n')
    this.size += s.length
    if (this.size > 1 << 16) this.flush()
  }
  flush() {
    if (this.buf.length === 0) return
    const chunk = this.buf.join('')
    this.buf = []
    this.size = 0
    if (!process.stdout.write(chunk)) {
      this.blocked = true
      this.pending = new Promise((r) => process.stdout.once('drain', r))
    }
  }
  async drain() {
    await this.pending
    this.blocked = false
  }
  async end() {
    this.flush()
    await this.drain()
  }
}

main().catch((e) => {
  process.stderr.write(`tardis harness: ${e.stack || e}\n`)
  process.exit(1)
})
