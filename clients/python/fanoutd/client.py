"""The asyncio client: one connection that stays up, books kept exactly."""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

import websockets
import websockets.exceptions

from . import book as B
from .errors import CLOSE_TAKEN_OVER, CLOSE_UNREAD_REPLIES, ClosedError, FanoutdError, refusal
from .messages import Connected, Disconnected, event, notice
from .tracker import Tracker


class Client:
    """A connection to fanoutd that stays connected: it reconnects with
    backoff and jitter to the next of its URLs, resubscribes (ephemeral) or
    reattaches stating last=<stream>:<seq> (named), keeps a Book per level2
    stream and reports every loss.

    ``on_message`` receives every message in order on the reader task; a
    coroutine function is awaited, so one that blocks stops the reading.
    Use ``async with Client(...)`` (runs it in a task) or ``await run()``.
    """

    def __init__(self, urls: str | Sequence[str], token: str | None = None, name: str | None = None, *,
                 on_message: Callable[[Any], Any] | None = None, min_backoff: float = 0.1, max_backoff: float = 10.0):
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("fanoutd: no URL")
        self.token, self.name = token, name
        self.on_message = on_message
        self.min_backoff, self.max_backoff = min_backoff, max(max_backoff, min_backoff)
        self._tr = Tracker()
        self._want: list[str] = []
        self._ws = None
        self._waiters: dict[str, list[tuple[asyncio.Future, list[str]]]] = {}
        self._queued: list[tuple[asyncio.Future, list[str]]] = []
        self._next = 0
        self._task: asyncio.Task | None = None
        self._done = asyncio.Event()
        self.error: BaseException | None = None
        self._drop = asyncio.Event()

    # -- lifecycle

    async def __aenter__(self) -> Client:
        self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def start(self) -> asyncio.Task:
        """Run the client in a task (once)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self.run())
        return self._task

    async def close(self) -> None:
        """Stop the client (its run task); a fatal error it ended with stays in .error."""
        t = self._task
        if t is None:
            return
        if not t.done():
            t.cancel()
        try:
            await t
        except (asyncio.CancelledError, FanoutdError):
            pass

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def wait_closed(self) -> BaseException | None:
        await self._done.wait()
        return self.error

    def reconnect(self) -> None:
        """Close the current connection; the client reconnects as after a failure."""
        self._drop.set()

    # -- subscriptions and books

    def book(self, stream: str) -> B.Book | None:
        st = self._tr.streams.get(stream)
        return st.book if st else None

    async def subscribe(self, *streams: str) -> None:
        """Subscribe and wait for the daemon's answer; raise its refusal as
        FanoutdError (nothing subscribed: a subscribe is all or nothing).
        Streams stay subscribed across reconnections."""
        if not streams:
            raise ValueError("fanoutd: no stream")
        if self._done.is_set():
            raise self.error or FanoutdError("closed")
        for s in streams:
            if s.count(":") < 2:
                raise ValueError(f"fanoutd: stream {s!r} is not venue:channel:symbol")
            if s not in self._want:
                self._want.append(s)
            self._tr.add(s)
        fut = asyncio.get_running_loop().create_future()
        entry = (fut, list(streams))
        if self._ws is not None:
            cid = self._id("sub")
            self._waiters.setdefault(cid, []).append(entry)
            await self._send({"op": "subscribe", "id": cid, "streams": list(streams)})
        else:
            self._queued.append(entry)
        done = asyncio.ensure_future(self._done.wait())
        try:
            await asyncio.wait({fut, done}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()
        if not fut.done():
            raise self.error or FanoutdError("closed")
        fut.result()

    async def unsubscribe(self, *streams: str) -> None:
        for s in streams:
            if s in self._want:
                self._want.remove(s)
            self._tr.remove(s)
        if self._ws is not None:
            await self._send({"op": "unsubscribe", "id": self._id("unsub"), "streams": list(streams)})

    async def watch_order_book(self, stream: str, limit: int | None = None) -> dict:
        """CCXT Pro's watchOrderBook: wait for the book's next valid state
        (subscribing first if needed) and return it as CCXT's shape: bids,
        asks ([price, size] Decimals, best first, at most limit), symbol,
        timestamp (ms of the venue's time, else the receive time), datetime,
        nonce (the seq)."""
        self.start()
        if stream not in self._want:
            await self.subscribe(stream)
        b = self.book(stream)
        if b is None:
            raise ValueError(f"fanoutd: {stream} is not a level2 stream")
        seen = getattr(self, "_watched", {}).get(stream)
        while not (b.valid and (seen is None or b.seq != seen)):
            if self._done.is_set():
                raise self.error or FanoutdError("closed")
            await b.changed()
        self.__dict__.setdefault("_watched", {})[stream] = b.seq
        bids, asks = b.top(limit)
        t = b.venue_time or b.recv_time
        return {"bids": [[p, s] for p, s in bids], "asks": [[p, s] for p, s in asks],
                "symbol": stream.split(":", 2)[2], "stream": stream,
                "timestamp": int(t.timestamp() * 1000) if t else None,
                "datetime": t.isoformat().replace("+00:00", "Z") if t else None,
                "nonce": b.seq}

    # -- internals

    def _id(self, prefix: str) -> str:
        self._next += 1
        return f"{prefix}{self._next}"

    async def _send(self, obj: dict) -> None:
        ws = self._ws
        if ws is not None:
            try:
                await ws.send(json.dumps(obj))
            except websockets.exceptions.ConnectionClosed:
                pass

    async def _deliver(self, msgs) -> None:
        h = self.on_message
        if h is None:
            return
        for m in msgs:
            r = h(m)
            if inspect.isawaitable(r):
                await r

    async def _flush(self, extra=None) -> None:
        out, asks = self._tr.take()
        for s in asks:
            await self._send({"op": "snapshot", "id": "snap:" + s, "stream": s})
        if extra is not None:
            out.append(extra)
        await self._deliver(out)

    def _dial_url(self, u: str) -> str:
        if not self.name:
            return u
        p = urllib.parse.urlsplit(u)
        q = urllib.parse.parse_qsl(p.query)
        q.append(("name", self.name))
        for s, seq in sorted(self._tr.last_read().items()):
            q.append(("last", f"{s}:{seq}"))
        return urllib.parse.urlunsplit(p._replace(query=urllib.parse.urlencode(q)))

    async def run(self) -> None:
        """Connect and stay connected until cancelled or refused for good
        (raises the fatal FanoutdError)."""
        attempt, i = 0, 0
        try:
            while True:
                u = self.urls[i % len(self.urls)]
                err: BaseException | None = None
                stable = [False]
                try:
                    await self._session(u, attempt, stable)
                except asyncio.CancelledError:
                    raise
                except BaseException as e:  # noqa: BLE001 - every failure reconnects, fatal ones excepted
                    err = e
                if stable[0]:
                    attempt = 0
                self._tr.disconnected()
                await self._flush(Disconnected(u, err))
                if isinstance(err, FanoutdError) and err.fatal:
                    self.error = err
                    raise err
                i += 1
                d = min(self.max_backoff, self.min_backoff * (2 ** min(attempt, 20)))
                attempt += 1
                await asyncio.sleep(d / 2 + random.random() * d / 2)
        finally:
            if self.error is None:
                self.error = FanoutdError("closed")
            self._done.set()
            for fut, _ in self._queued + [e for ws in self._waiters.values() for e in ws]:
                if not fut.done():
                    fut.set_exception(self.error)
            self._queued, self._waiters = [], {}

    async def _connect(self, target: str):
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        try:
            return await websockets.connect(target, extra_headers=headers, max_size=None, open_timeout=10,
                                            ping_interval=20, ping_timeout=20, compression=None)
        except websockets.exceptions.InvalidStatusCode as e:
            body = getattr(getattr(e, "response", None), "body", None)
            raise refusal(e.status_code, body) from None
        except getattr(websockets.exceptions, "InvalidStatus", ()) as e:  # websockets >= 14
            raise refusal(e.response.status_code, e.response.body) from None

    async def _session(self, u: str, attempt: int, stable: list) -> None:
        ws = await self._connect(self._dial_url(u))
        self._drop.clear()
        self._ws = ws
        resub = None
        if self._want:
            resub = self._id("resub")
            self._waiters.setdefault(resub, []).extend(self._queued)
            self._queued = []
        dropped = [False]

        async def drop():
            await self._drop.wait()
            dropped[0] = True
            await ws.close()
        dropper = asyncio.ensure_future(drop())
        taken_over = None
        try:
            await self._deliver([Connected(u, attempt)])
            if resub:
                await ws.send(json.dumps({"op": "subscribe", "id": resub, "streams": list(self._want)}))
            else:
                stable[0] = True
            while True:
                try:
                    msg = await ws.recv()
                except websockets.exceptions.ConnectionClosed as e:
                    if dropped[0]:
                        raise ClosedError(1000, "reconnect") from None
                    code, reason = (e.rcvd.code, e.rcvd.reason) if e.rcvd else (1006, "")
                    if code == CLOSE_TAKEN_OVER:
                        raise taken_over or FanoutdError("taken_over", reason, close_code=code)
                    if code == CLOSE_UNREAD_REPLIES:
                        raise FanoutdError("unread_replies", reason, close_code=code)
                    if code == 1008 and reason == "name_taken":
                        raise FanoutdError("name_taken", reason, close_code=code)
                    if taken_over:
                        raise taken_over
                    raise ClosedError(code, reason)
                if isinstance(msg, bytes):
                    msg = msg.decode()
                for line in msg.split("\n"):
                    e = await self._handle(line, resub, stable)
                    if e is not None:
                        taken_over = e
                        e.close_code = CLOSE_TAKEN_OVER
        finally:
            dropper.cancel()
            self._ws = None
            for ws_ in self._waiters.values():
                self._queued.extend(ws_)
            self._waiters = {}
            await ws.close()

    async def _handle(self, line: str, resub, stable):
        try:
            o = json.loads(line)
        except ValueError:
            return None
        t = o.get("type")
        if t in ("ack", "pong"):
            if o.get("id") == resub:
                stable[0] = True
            self._reply(o.get("id"), None)
        elif t == "error":
            e = FanoutdError(o.get("code", ""), o.get("message", ""), id=o.get("id"))
            if e.code == "taken_over":
                return e
            cid = o.get("id") or ""
            if cid.startswith("snap:"):
                self._tr.snapshot_refused(cid[5:])
            else:
                self._reply(cid, e)
        elif t == "notice":
            self._tr.notice(notice(o))
            await self._flush()
        else:
            new = self._tr.data(o)
            await self._flush(event(o) if new and self.on_message is not None else None)
        return None

    def _reply(self, cid, err) -> None:
        for fut, streams in self._waiters.pop(cid, []):
            if err is not None:
                for s in streams:
                    if s in self._want:
                        self._want.remove(s)
                    self._tr.remove(s)
            if not fut.done():
                if err is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(err)
