"""An order book kept exactly: Decimal keys, the wire's canonical strings."""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation

VALID = "valid"
INVALID = "invalid"

# Why a book is invalid.
REASON_SUBSCRIBING = "subscribing"    # no snapshot yet on this connection
REASON_GAP = "gap"                    # seqs were lost: a snapshot is coming, or was asked for
REASON_RESYNC = "resync"              # book_resync: the daemon rebuilds its book from the venue
REASON_DROPPING = "dropping"          # the daemon drops this subscriber's newest events
REASON_RECONNECTING = "reconnecting"  # the connection is down; the client reconnects
REASON_LINK_DOWN = "link_down"        # the venue link dropped: stale until the venue's next snapshot
REASON_BAD_LEVEL = "bad_level"        # an event held a price that does not parse; a snapshot was asked for


class _Side:
    """One side, best first: keys ascending (bids negated)."""

    __slots__ = ("keys", "levels", "neg")

    def __init__(self, neg: bool):
        self.keys: list[Decimal] = []
        self.levels: dict[Decimal, tuple[str, str]] = {}
        self.neg = neg

    def clear(self) -> None:
        self.keys.clear()
        self.levels.clear()

    def set(self, price: str, size: str) -> None:
        k = Decimal(price)
        if k.is_nan() or k.is_infinite() or k < 0:
            raise InvalidOperation(price)
        if self.neg:
            k = -k
        levels = self.levels
        if size == "0" or (size[:1] == "0" and not Decimal(size)):
            if k in levels:
                del levels[k]
                keys = self.keys
                del keys[bisect_left(keys, k)]
        elif k in levels:
            levels[k] = (price, size)
        else:
            levels[k] = (price, size)
            keys = self.keys
            keys.insert(bisect_left(keys, k), k)

    def top(self, n: int | None) -> list[tuple[str, str]]:
        keys = self.keys if n is None or n <= 0 else self.keys[:n]
        lv = self.levels
        return [lv[k] for k in keys]


@dataclass
class BookSnapshot:
    stream: str
    seq: int
    venue_seq: int
    venue_time: datetime | None
    recv_time: datetime | None
    state: str
    reason: str
    bids: list[tuple[str, str]] = field(default_factory=list)
    asks: list[tuple[str, str]] = field(default_factory=list)


class Book:
    """The book of one level2 stream. The client's reader updates it; read
    it from the same event loop."""

    def __init__(self, stream: str):
        self.stream = stream
        self._bids = _Side(True)
        self._asks = _Side(False)
        self.seq = 0
        self.venue_seq = 0
        self._vt: str | None = None  # the wire's times, parsed when read
        self._rt: str | None = None
        self.state = INVALID
        self.reason = REASON_SUBSCRIBING
        self.gap: tuple[int, int] | None = None
        self._changed: asyncio.Event | None = None

    @property
    def venue_time(self) -> datetime | None:
        """The venue's time of the last event applied (None where it gives none)."""
        from .messages import ts
        return ts(self._vt)

    @property
    def recv_time(self) -> datetime | None:
        """The daemon's receive time of the last event applied."""
        from .messages import ts
        return ts(self._rt)

    @property
    def valid(self) -> bool:
        return self.state == VALID

    def top(self, n: int | None = None) -> tuple[list[tuple[Decimal, Decimal]], list[tuple[Decimal, Decimal]]]:
        """Up to n levels of each side, best first, as Decimals."""
        return ([(Decimal(p), Decimal(s)) for p, s in self._bids.top(n)],
                [(Decimal(p), Decimal(s)) for p, s in self._asks.top(n)])

    def top_raw(self, n: int | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """Top with the wire's canonical strings."""
        return self._bids.top(n), self._asks.top(n)

    def bbo(self) -> tuple[tuple[Decimal, Decimal] | None, tuple[Decimal, Decimal] | None]:
        """The best bid and ask (price, size), None for an empty side."""
        b, a = self.top(1)
        return (b[0] if b else None), (a[0] if a else None)

    def snapshot(self) -> BookSnapshot:
        b, a = self.top_raw()
        return BookSnapshot(self.stream, self.seq, self.venue_seq, self.venue_time, self.recv_time,
                            self.state, self.reason, list(b), list(a))

    async def changed(self) -> None:
        """Wait for the book's next change (levels or state)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _apply(self, snapshot: bool, bids, asks) -> None:
        """Apply one event's levels ([price, size] strings); a snapshot
        replaces both sides. Raises on a price that does not parse."""
        if snapshot:
            self._bids.clear()
            self._asks.clear()
        bset, aset = self._bids.set, self._asks.set
        for p, s in bids:
            bset(p, s)
        for p, s in asks:
            aset(p, s)
