import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Book, priceKey, Tracker } from '../src/index.js';

const L2 = 'kraken:level2:BTC/USD';
const TR = 'kraken:trades:BTC/USD';

class Feed {
  constructor(...streams) {
    this.tr = new Tracker();
    for (const s of streams) this.tr.add(s);
    this.out = [];
    this.asks = [];
  }

  line(o) {
    if (o.type === 'notice') this.tr.notice(o);
    else if (this.tr.data(o)) this.tr.outbox.push({ type: 'event', seq: o.seq });
    const { out, asks } = this.tr.take();
    this.out.push(...out);
    this.asks.push(...asks);
  }

  state(s = L2) {
    const b = this.tr.streams.get(s).book;
    return [b.state, b.reason];
  }

  gaps() { return this.out.filter((m) => m.type === 'gap').map((g) => [g.stream, g.first, g.last, g.reason]); }
}

const snap = (seq, bids, asks) => ({ type: 'book', stream: L2, seq, snapshot: true, bids, asks });
const upd = (seq, bids, asks) => ({ type: 'book', stream: L2, seq, bids, asks });
const trade = (seq) => ({ type: 'trade', stream: TR, seq, price: '1', size: '1' });
const n = (kind, details = {}, stream = '') => ({ type: 'notice', kind, venue: 'kraken', stream, details });

test('book valid after snapshot and exact', () => {
  const f = new Feed(L2);
  assert.deepEqual(f.state(), ['invalid', 'subscribing']);
  f.line(snap(5, [['100.5', '1'], ['100', '2']], [['101', '1'], ['102.25', '3']]));
  assert.deepEqual(f.state(), ['valid', '']);
  f.line(upd(6, [['100.5', '0'], ['100.75', '4']], [['101', '0.5']]));
  const b = f.tr.streams.get(L2).book;
  assert.deepEqual(b.top(), { bids: [['100.75', '4'], ['100', '2']], asks: [['101', '0.5'], ['102.25', '3']] });
  assert.deepEqual(b.bbo(), { bid: ['100.75', '4'], ask: ['101', '0.5'] });
  assert.equal(b.seq, 6);
  const before = f.out.length;
  f.line(upd(6, [['1', '1']], []));
  assert.equal(f.out.length, before, 'a duplicate seq is not handed out');
});

test('a hole invalidates and asks a snapshot', () => {
  const f = new Feed(L2);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line(upd(2, [['99', '1']], []));
  f.line(upd(5, [['98', '1']], []));
  assert.deepEqual(f.state(), ['invalid', 'gap']);
  assert.deepEqual(f.tr.streams.get(L2).book.gap, [3, 4]);
  assert.deepEqual(f.asks, [L2]);
  assert.deepEqual(f.gaps(), [[L2, 3, 4, 'hole']]);
  f.line(upd(7, [], []));
  assert.deepEqual(f.asks, [L2]);
  f.line(snap(7, [['97', '1']], [['101', '1']]));
  assert.deepEqual(f.state(), ['valid', '']);
});

test('a resync waits for the rebuilt snapshot', () => {
  const f = new Feed(L2);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line(n('book_resync', { reason: 'checksum' }, L2));
  assert.deepEqual(f.state(), ['invalid', 'resync']);
  f.line(upd(2, [['99', '1']], []));
  assert.equal(f.tr.streams.get(L2).book.seq, 2);
  f.line(snap(2, [['99', '1']], []));
  assert.deepEqual(f.state(), ['invalid', 'resync']);
  assert.deepEqual(f.asks, []);
  f.line(snap(3, [['98', '2']], [['102', '1']]));
  assert.deepEqual(f.state(), ['valid', '']);
});

test('dropping, resumed with gaps, then the snapshot', () => {
  const f = new Feed(L2, TR);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line(trade(1));
  f.line(n('dropping'));
  assert.deepEqual(f.state(), ['invalid', 'dropping']);
  f.line(upd(2, [['99', '1']], []));
  f.line(n('resumed', { reason: 'drained', gaps: { [L2]: [4, 9], [TR]: [3, 5] } }));
  assert.deepEqual(f.state(), ['invalid', 'gap']);
  f.line(upd(3, [['98', '1']], []));
  f.line(trade(2));
  f.line(trade(6));
  f.line(snap(9, [['90', '1']], [['101', '1']]));
  assert.deepEqual(f.state(), ['valid', '']);
  assert.deepEqual(f.gaps().sort((a, b) => a[1] - b[1]), [[TR, 3, 5, 'resumed'], [L2, 4, 9, 'resumed']]);
  assert.deepEqual(f.asks, []);
});

test('resumed.recovered is contiguous', () => {
  const f = new Feed(L2, TR);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line(trade(1));
  f.line(n('resumed', { reason: 'reattached', gaps: { [L2]: [2, 3], [TR]: [2, 3] }, recovered: [L2, TR] }));
  f.line(upd(2, [['99', '1']], []));
  f.line(upd(3, [['98', '1']], []));
  f.line(trade(2));
  assert.deepEqual(f.state(), ['valid', '']);
  assert.deepEqual(f.gaps(), []);
});

test('link_down: stale until the next snapshot, only its streams', () => {
  const f = new Feed(L2, 'kraken:level2:ETH/USD');
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line({ type: 'notice', kind: 'link_down', venue: 'okx', details: {} });
  assert.deepEqual(f.state(), ['valid', '']);
  f.line(n('link_down', { reason: 'x', streams: ['kraken:level2:ETH/USD'] }));
  assert.deepEqual(f.state(), ['valid', '']);
  f.line(n('link_down', { reason: 'x' }));
  assert.deepEqual(f.state(), ['invalid', 'link_down']);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  assert.deepEqual(f.state(), ['invalid', 'link_down']);
  f.line(snap(2, [['100', '1']], [['101', '1']]));
  assert.deepEqual(f.state(), ['valid', '']);
});

test('reconnect: restart and holes', () => {
  const f = new Feed(L2, TR);
  f.line(snap(10, [['100', '1']], [['101', '1']]));
  f.line(trade(7));
  f.tr.disconnected();
  assert.deepEqual(f.state(), ['invalid', 'reconnecting']);
  f.line(snap(3, [['100', '1']], [['101', '1']]));
  assert.deepEqual(f.state(), ['valid', '']);
  f.line(trade(2));
  f.line(trade(4));
  assert.deepEqual(f.gaps(), [[TR, 0, 0, 'restart'], [TR, 3, 3, 'hole']]);
  assert.deepEqual(f.tr.lastRead(), { [L2]: 3, [TR]: 4 });
});

test('a bad level asks a snapshot', () => {
  const f = new Feed(L2);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line(upd(2, [['1e5', '1']], []));
  assert.deepEqual(f.state(), ['invalid', 'bad_level']);
  assert.deepEqual(f.asks, [L2]);
});

test('prices order exactly as scaled bigints', () => {
  assert.ok(priceKey('0.1') < priceKey('0.10000000000000001'));
  assert.equal(priceKey('1.50'), priceKey('1.5'));
  assert.throws(() => priceKey('-1'));
  assert.throws(() => priceKey('0.0000000000000000001'));
  const b = new Book('x:level2:y');
  b._apply(true, [['0.1', '1'], ['0.10000000000000001', '1'], ['1.50', '2'], ['1.5', '3']], []);
  assert.deepEqual(b.top().bids, [['1.5', '3'], ['0.10000000000000001', '1'], ['0.1', '1']]);
});

test('a reattach without a snapshot continues the book', () => {
  const f = new Feed(L2);
  f.line(snap(1, [['100', '1']], [['101', '1']]));
  f.line(upd(2, [['99', '1']], []));
  f.tr.disconnected();
  f.line(n('resumed', { reason: 'reattached', gaps: {}, recovered: { [L2]: [3, 4] } }));
  f.line(upd(3, [['98', '1']], []));
  assert.deepEqual(f.state(), ['valid', '']);
  f.line(upd(4, [['97', '1']], []));
  assert.equal(f.tr.streams.get(L2).book.top().bids.length, 4);
  assert.deepEqual([f.gaps(), f.asks], [[], []]);
  f.tr.disconnected();
  f.line(upd(9, [['96', '1']], []));
  assert.deepEqual(f.state(), ['invalid', 'gap']);
  assert.deepEqual([f.gaps(), f.asks], [[[L2, 5, 8, 'hole']], [L2]]);
  f.line(snap(9, [['96', '1']], [['101', '1']]));
  assert.deepEqual(f.state(), ['valid', '']);
});
