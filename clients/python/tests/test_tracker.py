"""Unit tests of the state machine and the book (no socket)."""

import json
from decimal import Decimal

import fanoutd
from fanoutd.messages import notice
from fanoutd.tracker import Tracker

L2 = "kraken:level2:BTC/USD"
TR = "kraken:trades:BTC/USD"


class Feed:
    def __init__(self, *streams):
        self.tr = Tracker()
        for s in streams:
            self.tr.add(s)
        self.out, self.asks = [], []

    def line(self, s):
        o = json.loads(s) if isinstance(s, str) else s
        if o["type"] == "notice":
            self.tr.notice(notice(o))
        elif self.tr.data(o):
            self.tr.outbox.append(("event", o.get("seq")))
        out, asks = self.tr.take()
        self.out += out
        self.asks += asks

    def state(self, stream=L2):
        b = self.tr.streams[stream].book
        return b.state, b.reason

    def gaps(self):
        return [(g.stream, g.first, g.last, g.reason) for g in self.out if isinstance(g, fanoutd.Gap)]


def snap(seq, bids, asks):
    return {"type": "book", "stream": L2, "seq": seq, "snapshot": True, "bids": bids, "asks": asks}


def upd(seq, bids, asks):
    return {"type": "book", "stream": L2, "seq": seq, "bids": bids, "asks": asks}


def trade(seq):
    return {"type": "trade", "stream": TR, "seq": seq, "price": "1", "size": "1"}


def n(kind, **kw):
    return {"type": "notice", "kind": kind, "venue": "kraken", "stream": kw.pop("stream", ""), "details": kw}


def test_book_valid_after_snapshot_and_exact():
    f = Feed(L2)
    assert f.state() == ("invalid", "subscribing")
    f.line(snap(5, [["100.5", "1"], ["100", "2"]], [["101", "1"], ["102.25", "3"]]))
    assert f.state() == ("valid", "")
    f.line(upd(6, [["100.5", "0"], ["100.75", "4"]], [["101", "0.5"]]))
    b = f.tr.streams[L2].book
    assert b.top_raw() == ([("100.75", "4"), ("100", "2")], [("101", "0.5"), ("102.25", "3")])
    assert b.bbo() == ((Decimal("100.75"), Decimal("4")), (Decimal("101"), Decimal("0.5")))
    assert b.seq == 6
    before = len(f.out)
    f.line(upd(6, [["1", "1"]], []))
    assert len(f.out) == before, "a duplicate seq is not handed out"


def test_hole_invalidates_and_asks_snapshot():
    f = Feed(L2)
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line(upd(2, [["99", "1"]], []))
    f.line(upd(5, [["98", "1"]], []))
    assert f.state() == ("invalid", "gap")
    assert f.tr.streams[L2].book.gap == (3, 4)
    assert f.asks == [L2]
    assert f.gaps() == [(L2, 3, 4, "hole")]
    f.line(upd(7, [], []))
    assert f.asks == [L2], "one snapshot op at a time"
    f.line(snap(7, [["97", "1"]], [["101", "1"]]))
    assert f.state() == ("valid", "")
    assert f.tr.streams[L2].book.top_raw()[0] == [("97", "1")]


def test_resync_waits_for_rebuilt_snapshot():
    f = Feed(L2)
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line(n("book_resync", stream=L2, reason="checksum"))
    assert f.state() == ("invalid", "resync")
    f.line(upd(2, [["99", "1"]], []))  # queued before the notice: still applied
    assert f.tr.streams[L2].book.seq == 2
    f.line(snap(2, [["99", "1"]], []))  # at the current seq: the book being replaced
    assert f.state() == ("invalid", "resync")
    assert f.asks == []
    f.line(snap(3, [["98", "2"]], [["102", "1"]]))
    assert f.state() == ("valid", "")


def test_dropping_resumed_gap_then_snapshot():
    f = Feed(L2, TR)
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line(trade(1))
    f.line(n("dropping"))
    assert f.state() == ("invalid", "dropping")
    f.line(upd(2, [["99", "1"]], []))
    f.line(n("resumed", reason="drained", gaps={L2: [4, 9], TR: [3, 5]}))
    assert f.state() == ("invalid", "gap")
    f.line(upd(3, [["98", "1"]], []))
    f.line(trade(2))
    f.line(trade(6))
    f.line(snap(9, [["90", "1"]], [["101", "1"]]))
    assert f.state() == ("valid", "")
    f.line(upd(10, [["91", "1"]], []))
    assert f.state() == ("valid", "")
    assert sorted(f.gaps(), key=lambda g: g[1]) == [(TR, 3, 5, "resumed"), (L2, 4, 9, "resumed")]
    assert f.asks == []


def test_resumed_recovered_is_contiguous():
    f = Feed(L2, TR)
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line(trade(1))
    f.line(n("resumed", reason="reattached", gaps={L2: [2, 3], TR: [2, 3]}, recovered=[L2, TR]))
    assert f.state() == ("valid", "")
    f.line(upd(2, [["99", "1"]], []))
    f.line(upd(3, [["98", "1"]], []))
    f.line(trade(2))
    assert f.state() == ("valid", "")
    assert f.gaps() == []


def test_link_down_stale_until_next_snapshot():
    f = Feed(L2, "kraken:level2:ETH/USD")
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line({"type": "notice", "kind": "link_down", "venue": "okx", "details": {}})
    assert f.state() == ("valid", "")
    f.line(n("link_down", reason="x", streams=["kraken:level2:ETH/USD"]))
    assert f.state() == ("valid", "")
    f.line(n("link_down", reason="x"))
    assert f.state() == ("invalid", "link_down")
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    assert f.state() == ("invalid", "link_down")
    f.line(snap(2, [["100", "1"]], [["101", "1"]]))
    assert f.state() == ("valid", "")


def test_reconnect_restart_and_holes():
    f = Feed(L2, TR)
    f.line(snap(10, [["100", "1"]], [["101", "1"]]))
    f.line(trade(7))
    f.tr.disconnected()
    assert f.state() == ("invalid", "reconnecting")
    f.line(snap(3, [["100", "1"]], [["101", "1"]]))
    assert f.state() == ("valid", "")
    f.line(trade(2))
    f.line(trade(4))
    assert f.gaps() == [(TR, 0, 0, "restart"), (TR, 3, 3, "hole")]
    assert f.tr.last_read() == {L2: 3, TR: 4}


def test_bad_level_asks_snapshot():
    f = Feed(L2)
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line(upd(2, [["abc", "1"]], []))
    assert f.state() == ("invalid", "bad_level")
    assert f.asks == [L2]


def test_prices_order_exactly():
    b = fanoutd.Book("x:level2:y")
    b._apply(True, [["0.1", "1"], ["0.10000000000000001", "1"], ["1.50", "2"], ["1.5", "3"]], [])
    assert b.top_raw()[0] == [("1.5", "3"), ("0.10000000000000001", "1"), ("0.1", "1")]


def test_reattach_without_snapshot():
    f = Feed(L2)
    f.line(snap(1, [["100", "1"]], [["101", "1"]]))
    f.line(upd(2, [["99", "1"]], []))
    f.tr.disconnected()
    f.line(n("resumed", reason="reattached", gaps={}, recovered={L2: [3, 4]}))
    f.line(upd(3, [["98", "1"]], []))
    assert f.state() == ("valid", "")
    f.line(upd(4, [["97", "1"]], []))
    assert len(f.tr.streams[L2].book.top_raw()[0]) == 4 and f.gaps() == [] and f.asks == []
    f.tr.disconnected()
    f.line(upd(9, [["96", "1"]], []))
    assert f.state() == ("invalid", "gap")
    assert f.gaps() == [(L2, 5, 8, "hole")] and f.asks == [L2]
    f.line(snap(9, [["96", "1"]], [["101", "1"]]))
    assert f.state() == ("valid", "")
