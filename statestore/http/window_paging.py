"""Pages of a window store's windows and their continuation tokens.

Windows come by key bytes, then window start (statestore.store.window). A token is opaque to
clients, like /entries' (statestore.http.paging): URL-safe base64 of a small JSON object
naming the query (store, key, from, to) and the raw (key, start) the page ended with; the
next page reads from that key on and continues strictly after that window.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from itertools import islice

from statestore.core.model import EVERYTHING, KeyRange, WindowedEntry
from statestore.http.paging import PageTokenError


@dataclass(frozen=True)
class WindowQuery:
    """What a page request asks: the store, one key's windows (raw bytes) or every key's, and
    the window starts in [time_from, time_to]."""

    store: str
    key: bytes | None
    time_from: int
    time_to: int


def encode_token(query: WindowQuery, last: WindowedEntry) -> str:
    body = {
        "s": query.store,
        "k": None if query.key is None else query.key.hex(),
        "f": query.time_from,
        "t": query.time_to,
        "a": [last.key.hex(), last.start_ms],
    }
    raw = json.dumps(body, separators=(",", ":")).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def resume(query: WindowQuery, token: str | None) -> tuple[bytes, int] | None:
    """The raw (key, start) a request's page_token continues after; None without a token."""
    if token is None:
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        asked = WindowQuery(body["s"], None if body["k"] is None else bytes.fromhex(body["k"]), body["f"], body["t"])
        key_hex, start = body["a"]
        after = (bytes.fromhex(key_hex), start)
        if not isinstance(start, int) or isinstance(start, bool):
            raise ValueError("bad start")
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise PageTokenError(
            f"page_token {token[:40]!r} is not one this API issued: pass next_page_token exactly as returned, "
            "or leave page_token out to start from the beginning"
        ) from None
    if asked != query:
        raise PageTokenError("page_token belongs to another query: repeat the first request's store, key, from and to")
    return after


def read_window_page(store, query: WindowQuery, after: tuple[bytes, int] | None, limit: int):
    """(up to `limit` raw windows of `store`, a WindowStore, after `after`; the next page's
    token or None when the query is done)."""
    if query.key is not None:
        key_range = KeyRange(query.key, query.key)
    elif after is not None:
        key_range = KeyRange(after[0], None)
    else:
        key_range = EVERYTHING
    rows = store.raw_windows(key_range, query.time_from, query.time_to)
    if after is not None:
        rows = (row for row in rows if (row.key, row.start_ms) > after)
    page = list(islice(rows, limit + 1))
    if len(page) <= limit:
        return page, None
    return page[:limit], encode_token(query, page[limit - 1])
