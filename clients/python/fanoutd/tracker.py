"""The client's state machine: per stream the last seq read and the losses
announced; per level2 stream its book and the snapshot it waits for. The
same machine as the Go client's (client/tracker.go) and the TypeScript
one's: one behaviour, one spec (clients/scenarios)."""

from __future__ import annotations

from decimal import InvalidOperation

from . import book as B
from .messages import BookState, Gap, Notice, ts


def _channel(stream: str) -> str:
    parts = stream.split(":", 2)
    return parts[1] if len(parts) == 3 else ""


class _Stream:
    __slots__ = ("name", "level2", "conflated", "last", "fresh", "announced", "book",
                 "have", "dropping", "need", "min", "asked", "holed")

    def __init__(self, name: str):
        ch = _channel(name)
        self.name = name
        self.level2 = ch == "level2"
        self.conflated = ch == "quote" or ch.startswith("book_snapshot_")
        self.last = 0
        self.fresh = True
        self.announced: list[tuple[int, int]] = []
        self.book = B.Book(name) if self.level2 else None
        self.have = False
        self.dropping = False
        self.need = B.REASON_SUBSCRIBING if self.level2 else ""
        self.min = 0
        self.asked = False
        self.holed = False

    def reason(self) -> str:
        if self.need:
            return self.need
        if not self.have:
            return B.REASON_SUBSCRIBING
        if self.dropping:
            return B.REASON_DROPPING
        return ""

    def announce(self, first: int, last: int) -> None:
        self.announced.append((first, last))
        self.announced.sort()

    def unannounced(self, first: int, last: int) -> list[tuple[int, int]]:
        out = []
        cur = first
        for a0, a1 in self.announced:
            if a1 < cur or a0 > last:
                continue
            if a0 > cur:
                out.append((cur, a0 - 1))
            cur = max(cur, a1 + 1)
        if cur <= last:
            out.append((cur, last))
        self.announced = [a for a in self.announced if a[1] > last]
        return out


class Tracker:
    def __init__(self):
        self.streams: dict[str, _Stream] = {}
        self.outbox: list = []
        self.asks: list[str] = []

    def take(self):
        out, asks = self.outbox, self.asks
        self.outbox, self.asks = [], []
        return out, asks

    def add(self, name: str):
        st = self.streams.get(name)
        if st is None:
            st = self.streams[name] = _Stream(name)
        return st.book

    def remove(self, name: str) -> None:
        self.streams.pop(name, None)

    def last_read(self) -> dict[str, int]:
        return {s.name: s.last for s in self.streams.values() if s.last > 0}

    def disconnected(self) -> None:
        for st in self.streams.values():
            st.fresh, st.dropping, st.asked, st.have = True, False, False, False
            if st.level2:
                st.need = B.REASON_RECONNECTING
                self._update(st)

    def _update(self, st: _Stream) -> None:
        b = st.book
        r = st.reason()
        s = B.VALID if r == "" else B.INVALID
        gap = None
        if r == B.REASON_GAP and st.announced:
            gap = (st.announced[0][0], st.announced[-1][1])
        if b.state != s or b.reason != r:
            b.state, b.reason, b.gap = s, r, gap
            b._notify()
            self.outbox.append(BookState(st.name, s, r, b.seq, gap))

    def _hole(self, st: _Stream, first: int, last: int) -> None:
        for f, l in st.unannounced(first, last):
            self.outbox.append(Gap(st.name, f, l, "hole"))

    def _request(self, st: _Stream) -> None:
        if not st.asked:
            st.asked = True
            self.asks.append(st.name)

    def snapshot_refused(self, stream: str) -> None:
        st = self.streams.get(stream)
        if st is not None:
            st.asked = False

    def data(self, o: dict) -> bool:
        """Handle one event; whether it is new (to be handed out)."""
        st = self.streams.get(o.get("stream", ""))
        if st is None:
            return True
        seq = o.get("seq", 0)
        if st.level2 and o.get("type") == "book":
            return self._book(st, o, seq)
        if st.fresh and st.last > 0 and seq <= st.last:
            self.outbox.append(Gap(st.name, 0, 0, "restart"))
            st.announced.clear()
        elif seq <= st.last:
            return False
        elif seq > st.last + 1 and st.last > 0 and not st.conflated:
            self._hole(st, st.last + 1, seq - 1)
        st.last, st.fresh = seq, False
        return True

    def _apply(self, st: _Stream, o: dict, snapshot: bool) -> None:
        b = st.book
        try:
            b._apply(snapshot, o.get("bids") or (), o.get("asks") or ())
        except (InvalidOperation, ValueError, TypeError):
            st.need, st.min = B.REASON_BAD_LEVEL, st.last
            self._request(st)
        b.seq, b.venue_seq = o.get("seq", 0), o.get("venue_seq", 0)
        b._vt, b._rt = o.get("venue_time"), o.get("recv_time")
        b._notify()

    def _book(self, st: _Stream, o: dict, seq: int) -> bool:
        if o.get("snapshot"):
            need = st.need
            if need in (B.REASON_RESYNC, B.REASON_LINK_DOWN):
                # A snapshot at the seq last read (a reply, a resume) is the
                # book being replaced; the rebuilt one is published at a new seq.
                accept = seq > st.last
            elif need == B.REASON_GAP:
                accept = seq >= st.min
            else:
                accept = True
            if not accept:
                return True
            st.need = ""
            st.last, st.fresh, st.have, st.asked, st.holed = seq, False, True, False, False
            st.announced = [a for a in st.announced if a[1] > seq]
            self._apply(st, o, True)
            self._update(st)
            return True
        if seq <= st.last:
            return False
        if not st.have and st.need == B.REASON_RECONNECTING and st.last > 0:
            # An update before any snapshot on a new connection: the book
            # continues if nothing is missing, else the hole is named and a
            # snapshot asked for.
            if seq == st.last + 1 and st.book.seq == st.last:
                st.have, st.need = True, ""
            else:
                self._hole(st, st.last + 1, seq - 1)
                st.announce(st.last + 1, seq - 1)
                st.need, st.min, st.holed = B.REASON_GAP, seq, True
                self._request(st)
        if st.have and seq > st.last + 1:
            st.holed = True
            self._hole(st, st.last + 1, seq - 1)
            if not st.need:
                st.need, st.min = B.REASON_GAP, seq
                st.announce(st.last + 1, seq - 1)
                if not st.dropping:
                    self._request(st)
        st.last, st.fresh = seq, False
        # During a resync or a link drop the updates still queued continue
        # the daemon's book: applied, the levels stay equal to it.
        if st.have and not st.holed and st.need in ("", B.REASON_RESYNC, B.REASON_LINK_DOWN):
            self._apply(st, o, False)
        self._update(st)
        return True

    def _venue(self, venue: str):
        return [s for s in self.streams.values() if s.name.split(":", 1)[0] == venue]

    def notice(self, n: Notice) -> None:
        self.outbox.append(n)
        k, d = n.kind, n.details
        if k == "book_resync":
            st = self.streams.get(n.stream)
            if st is not None and st.level2:
                st.need = B.REASON_RESYNC
                self._update(st)
        elif k == "link_down":
            only = d.get("streams")
            for st in self._venue(n.venue):
                if st.level2 and (only is None or st.name in only):
                    st.need = B.REASON_LINK_DOWN
                    self._update(st)
        elif k == "dropping":
            for st in self._venue(n.venue):
                st.dropping = True
                if st.level2:
                    self._update(st)
        elif k == "resumed":
            gaps = d.get("gaps") or {}
            rec = d.get("recovered") or ()
            for st in self._venue(n.venue):
                st.dropping = False
                g = gaps.get(st.name)
                if g and len(g) == 2 and st.name not in rec:
                    f, l = int(g[0]), int(g[1])
                    if l >= f and l > 0:
                        st.announce(f, l)
                        self.outbox.append(Gap(st.name, f, l, "resumed"))
                        if st.level2 and st.need not in (B.REASON_RESYNC, B.REASON_LINK_DOWN):
                            st.need, st.min = B.REASON_GAP, l
                if st.level2:
                    self._update(st)
        elif k == "stream_gap":
            st = self.streams.get(n.stream)
            if st is not None:
                f, l = int(d.get("first", 0)), int(d.get("last", 0))
                if l >= f and l > 0:
                    st.announce(f, l)
                    self.outbox.append(Gap(st.name, f, l, "stream_gap"))
