"""fanoutd's Python client: exact order books over the daemon's websocket
API, every loss reported, reconnecting on its own.

    async with fanoutd.Client(["ws://127.0.0.1:8080/v1/stream"]) as c:
        while True:
            ob = await c.watch_order_book("coinbase:level2:BTC-USD", limit=10)
            print(ob["nonce"], ob["bids"][0], ob["asks"][0])
"""

from .book import (INVALID, REASON_BAD_LEVEL, REASON_DROPPING, REASON_GAP, REASON_LINK_DOWN, REASON_RECONNECTING,
                   REASON_RESYNC, REASON_SUBSCRIBING, VALID, Book, BookSnapshot)
from .client import Client
from .errors import CLOSE_TAKEN_OVER, CLOSE_UNREAD_REPLIES, ClosedError, FanoutdError
from .messages import (BookEvent, BookState, Connected, Disconnected, Gap, Notice, Quote, Ticker, Trade, TradeBar)

__all__ = ["Client", "Book", "BookSnapshot", "FanoutdError", "ClosedError", "BookEvent", "BookState", "Connected",
           "Disconnected", "Gap", "Notice", "Quote", "Ticker", "Trade", "TradeBar", "VALID", "INVALID",
           "REASON_SUBSCRIBING", "REASON_GAP", "REASON_RESYNC", "REASON_DROPPING", "REASON_RECONNECTING",
           "REASON_LINK_DOWN", "REASON_BAD_LEVEL", "CLOSE_TAKEN_OVER", "CLOSE_UNREAD_REPLIES"]
