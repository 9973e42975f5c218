"""Errors: the daemon's vocabulary of codes (docs: Websocket API, Errors)."""

from __future__ import annotations

CLOSE_TAKEN_OVER = 4001
CLOSE_UNREAD_REPLIES = 4002

# Codes of a refused upgrade, by HTTP status, for a websockets version that
# does not hand out the response body (10.x).
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "unauthorized",
    409: "name_taken",
    429: "too_many_connections",
    503: "shutting_down",
}

_FATAL = {"unauthenticated", "unauthorized", "origin_not_allowed", "bad_name", "name_taken", "taken_over"}


class FanoutdError(Exception):
    """A refusal by the daemon: an error reply (``id`` set), a refused
    upgrade (``http_status`` set) or a close code of its own
    (``close_code`` set). Code against ``code``, not the message."""

    def __init__(self, code: str, message: str = "", *, id: str | None = None,
                 http_status: int | None = None, close_code: int | None = None):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.id = id
        self.http_status = http_status
        self.close_code = close_code

    @property
    def fatal(self) -> bool:
        """Whether reconnecting cannot help (a refused token, a name another
        token holds, a takeover): a fatal error ends Client.run."""
        if self.code in _FATAL:
            return True
        return self.code == "bad_request" and self.http_status is not None


class ClosedError(Exception):
    """The daemon closed the connection with a code that is not one of its
    errors (1001 on shutdown)."""

    def __init__(self, code: int, reason: str = ""):
        super().__init__(f"closed {code} {reason}")
        self.code = code
        self.reason = reason


def refusal(status: int, body: bytes | None) -> FanoutdError:
    """The error of a refused upgrade, from its JSON body when there is one."""
    import json

    if body:
        try:
            obj = json.loads(body)
            if isinstance(obj, dict) and obj.get("code"):
                return FanoutdError(obj["code"], obj.get("message", ""), http_status=status)
        except ValueError:
            pass
    return FanoutdError(_STATUS_CODES.get(status, f"http_{status}"), f"HTTP {status}", http_status=status)
