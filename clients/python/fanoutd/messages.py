"""Typed messages the client hands out."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any


def ts(s: str | None) -> datetime | None:
    if not s:
        return None
    # RFC 3339 with up to 9 fraction digits; datetime keeps 6.
    if "." in s:
        head, frac = s.rstrip("Z").split(".", 1)
        s = f"{head}.{frac[:6].ljust(6, '0')}+00:00"
    else:
        s = s.replace("Z", "+00:00")
    return datetime.fromisoformat(s)


def dec(s: str | None) -> Decimal | None:
    return Decimal(s) if s not in (None, "") else None


@dataclass
class BookEvent:
    """A level2 event (snapshot or update) or a book_snapshot_* message."""
    stream: str
    seq: int
    snapshot: bool
    venue_seq: int
    venue_time: datetime | None
    recv_time: datetime | None
    bids: list  # [price, size] canonical strings
    asks: list


@dataclass
class Trade:
    stream: str
    seq: int
    id: str
    price: Decimal
    size: Decimal
    side: str  # the taker side; "" where the venue does not say
    venue_time: datetime | None
    recv_time: datetime | None


@dataclass
class Ticker:
    stream: str
    seq: int
    bid: Decimal | None
    bid_size: Decimal | None
    ask: Decimal | None
    ask_size: Decimal | None
    last: Decimal | None
    venue_time: datetime | None
    recv_time: datetime | None


@dataclass
class Quote:
    stream: str
    seq: int
    bid: Decimal | None  # None while that side is empty
    bid_size: Decimal | None
    ask: Decimal | None
    ask_size: Decimal | None
    venue_time: datetime | None
    recv_time: datetime | None


@dataclass
class TradeBar:
    stream: str
    seq: int
    interval_ms: int
    start: datetime | None
    end: datetime | None
    open: Decimal | None
    high: Decimal | None
    low: Decimal | None
    close: Decimal | None
    volume: Decimal | None
    buy_volume: Decimal | None
    sell_volume: Decimal | None
    trades: int
    first_trade_time: datetime | None
    last_trade_time: datetime | None
    gap: bool


@dataclass
class Notice:
    kind: str
    severity: str
    venue: str
    stream: str
    at: datetime | None
    message: str
    details: dict = field(default_factory=dict)


@dataclass
class Gap:
    """Seqs first..last of stream were lost. reason: "resumed", "stream_gap",
    "hole" (seen by the client), "restart" (numbering restarted after a
    reconnect: extent unknown, first = last = 0)."""
    stream: str
    first: int
    last: int
    reason: str


@dataclass
class BookState:
    stream: str
    state: str
    reason: str
    seq: int
    gap: tuple[int, int] | None = None


@dataclass
class Connected:
    url: str
    attempt: int


@dataclass
class Disconnected:
    url: str
    error: BaseException | None


def event(o: dict[str, Any]):
    """The typed event of a data object, or None."""
    t = o.get("type")
    g = o.get
    if t == "book":
        return BookEvent(o["stream"], o["seq"], bool(g("snapshot")), g("venue_seq", 0), ts(g("venue_time")), ts(g("recv_time")),
                         g("bids") or [], g("asks") or [])
    if t == "trade":
        return Trade(o["stream"], o["seq"], g("id", ""), dec(g("price")), dec(g("size")), g("side", ""), ts(g("venue_time")), ts(g("recv_time")))
    if t == "ticker":
        return Ticker(o["stream"], o["seq"], dec(g("bid")), dec(g("bid_size")), dec(g("ask")), dec(g("ask_size")), dec(g("last")),
                      ts(g("venue_time")), ts(g("recv_time")))
    if t == "quote":
        return Quote(o["stream"], o["seq"], dec(g("bid")), dec(g("bid_size")), dec(g("ask")), dec(g("ask_size")),
                     ts(g("venue_time")), ts(g("recv_time")))
    if t == "trade_bar":
        return TradeBar(o["stream"], o["seq"], g("interval_ms", 0), ts(g("start")), ts(g("end")), dec(g("open")), dec(g("high")),
                        dec(g("low")), dec(g("close")), dec(g("volume")), dec(g("buy_volume")), dec(g("sell_volume")),
                        g("trades", 0), ts(g("first_trade_time")), ts(g("last_trade_time")), bool(g("gap")))
    return None


def notice(o: dict[str, Any]) -> Notice:
    return Notice(o.get("kind", ""), o.get("severity", ""), o.get("venue", ""), o.get("stream", ""), ts(o.get("at")),
                  o.get("message", ""), o.get("details") or {})
