"""Pages of a window or session store and their continuation tokens.

Windows come by key bytes, then window start (statestore.store.window); sessions by key
bytes, then end, then start (statestore.store.session): a row's *position* is its raw key and
those times. A token is opaque to clients, like /entries' (statestore.http.paging): URL-safe
base64 of a small JSON object naming the query (store, key, from, to) and the position the
page ended at; the next page reads from that key on and continues strictly after it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice

from statestore.core.model import EVERYTHING, KeyRange
from statestore.http.paging import PageTokenError

Position = tuple[bytes, tuple[int, ...]]  # a row's raw key and its times, in the store's order


@dataclass(frozen=True)
class WindowQuery:
    """What a page request asks: the store, one key's windows (raw bytes) or every key's, and
    the window starts in [time_from, time_to]."""

    store: str
    key: bytes | None
    time_from: int
    time_to: int


def encode_token(query: WindowQuery, last: Position) -> str:
    body = {
        "s": query.store,
        "k": None if query.key is None else query.key.hex(),
        "f": query.time_from,
        "t": query.time_to,
        "a": [last[0].hex(), list(last[1])],
    }
    raw = json.dumps(body, separators=(",", ":")).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def resume(query: WindowQuery, token: str | None) -> Position | None:
    """The position a request's page_token continues after; None without a token."""
    if token is None:
        return None
    try:
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        asked = WindowQuery(body["s"], None if body["k"] is None else bytes.fromhex(body["k"]), body["f"], body["t"])
        key_hex, times = body["a"]
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in times):
            raise ValueError("bad times")
        after = (bytes.fromhex(key_hex), tuple(times))
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise PageTokenError(
            f"page_token {token[:40]!r} is not one this API issued: pass next_page_token exactly as returned, "
            "or leave page_token out to start from the beginning"
        ) from None
    if asked != query:
        raise PageTokenError("page_token belongs to another query: repeat the first request's store, key, from and to")
    return after


def read_timed_page(
    rows_of: Callable[[KeyRange], Iterator],
    position: Callable[[object], Position],
    query: WindowQuery,
    after: Position | None,
    limit: int,
):
    """(up to `limit` raw rows after `after`, read by `rows_of(key_range)` in the order of
    `position`; the next page's token or None when the query is done)."""
    if query.key is not None:
        key_range = KeyRange(query.key, query.key)
    elif after is not None:
        key_range = KeyRange(after[0], None)
    else:
        key_range = EVERYTHING
    rows = rows_of(key_range)
    if after is not None:
        rows = (row for row in rows if position(row) > after)
    page = list(islice(rows, limit + 1))
    if len(page) <= limit:
        return page, None
    return page[:limit], encode_token(query, position(page[limit - 1]))
