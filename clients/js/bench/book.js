// Applies the recorded level2 events (clients/testdata) through the
// client's state machine to a book, decoded beforehand, and prints
// events/s. `node bench/book.js [passes]`; pin to one core with taskset.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

import { Tracker, VALID } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const lines = zlib.gunzipSync(fs.readFileSync(path.join(here, '..', '..', 'testdata', 'coinbase-level2.jsonl.gz'))).toString().trim().split('\n');
const events = lines.map((l) => JSON.parse(l));
const passes = Number(process.argv[2] ?? 30);
const stream = events[0].stream;

function pass() {
  const tr = new Tracker();
  tr.add(stream);
  for (const ev of events) {
    tr.data(ev);
    tr.outbox.length = 0;
  }
  return tr.streams.get(stream).book;
}

for (let i = 0; i < 5; i++) pass(); // warm up
const t0 = process.hrtime.bigint();
let b;
for (let i = 0; i < passes; i++) b = pass();
const s = Number(process.hrtime.bigint() - t0) / 1e9;
if (b.state !== VALID && b.reason !== 'link_down') throw new Error(`book ${b.state} ${b.reason}`);
console.log(`${Math.round((events.length * passes) / s)} events/s (${events.length * passes} events in ${s.toFixed(3)} s; decode excluded)`);

const t1 = process.hrtime.bigint();
for (let i = 0; i < passes; i++) {
  const tr = new Tracker();
  tr.add(stream);
  for (const l of lines) { tr.data(JSON.parse(l)); tr.outbox.length = 0; }
}
const s1 = Number(process.hrtime.bigint() - t1) / 1e9;
console.log(`${Math.round((events.length * passes) / s1)} events/s with JSON.parse of each event`);
