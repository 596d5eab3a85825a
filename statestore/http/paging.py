"""Pages of the API's listings and their continuation tokens: /entries of any store, /windows
and /sessions of window and session stores.

A token is opaque to clients: URL-safe base64 of a small JSON object naming the query and where
its page ended. A request's token must belong to that very query (else PageTokenError, a 400),
and the next page continues strictly after where the last one ended; rows written meanwhile
appear on a later page only if they sort after that point (no snapshot across pages).

Entries page by key (`Cursor`: store, key range, direction, last raw key):

- stores with ordered keys (partitioned types) scan `KeyRange.after(last_key)`, every store
  partition read concurrently and merged in key byte order;
- global stores page through the whole store in Cassandra's token order (hash order: stable
  while the store is unchanged, but not sorted) with `token(key) > token(last_key)`; they have
  no range, prefix or reverse paging, since any of those would read the whole table per page.

Windows and sessions page by *position* (`WindowQuery`: store, key, from, to): a row's raw key,
then its times in the store's order: window start for windows (statestore.store.window); end,
then start for sessions (statestore.store.session).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, TypeVar

from statestore.core.errors import StateStoreError, UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange

# Rows asked of each store partition per round trip: enough for most pages in one, and a
# bounded read-ahead when a page spans many partitions.
_PARTITION_PAGE_ROWS = 1000
_TOKEN_PAGE_ROWS = 5000

_Read = TypeVar("_Read")


class PageTokenError(StateStoreError, ValueError):
    """A page_token that is malformed or belongs to another query."""


def _encode(body: dict[str, Any]) -> str:
    raw = json.dumps(body, separators=(",", ":")).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(token: str, read: Callable[[Any], _Read]) -> _Read:
    """`read` applied to the JSON body of `token`; any failure is a token this API did not issue."""
    try:
        return read(json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))))
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise PageTokenError(
            f"page_token {token[:40]!r} is not one this API issued: pass next_page_token exactly as returned, "
            "or leave page_token out to start from the beginning"
        ) from None


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _unhex(text: Any) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError("not hex text")
    return bytes.fromhex(text)


# Entries, by key.


@dataclass(frozen=True)
class Cursor:
    """Where a scan stands: its store, range, direction and the last key served (None: start)."""

    store: str
    key_range: KeyRange
    reverse: bool
    after: bytes | None = None


def encode_token(cursor: Cursor) -> str:
    r = cursor.key_range
    return _encode(
        {
            "s": cursor.store,
            "r": [_hex(r.lower), _hex(r.upper), r.lower_inclusive, r.upper_inclusive],
            "d": cursor.reverse,
            "a": _hex(cursor.after),
        }
    )


def _cursor_of(body: Any) -> Cursor:
    lower, upper, lower_inclusive, upper_inclusive = body["r"]
    flags = (lower_inclusive, upper_inclusive, body["d"])
    if not all(isinstance(flag, bool) for flag in flags) or not isinstance(body["s"], str):
        raise ValueError("bad field types")
    key_range = KeyRange(_unhex(lower), _unhex(upper), lower_inclusive, upper_inclusive)
    return Cursor(body["s"], key_range, body["d"], _unhex(body["a"]))


def decode_token(token: str) -> Cursor:
    cursor = _decode(token, _cursor_of)
    if cursor.after is not None and not cursor.key_range.contains(cursor.after):
        raise PageTokenError("page_token continues after a key outside its own range: it was altered")
    return cursor


def resume(store_name: str, key_range: KeyRange, reverse: bool, token: str | None) -> Cursor:
    """The cursor of a request: from its page_token, which must belong to this very query."""
    if token is None:
        return Cursor(store_name, key_range, reverse)
    cursor = decode_token(token)
    if (cursor.store, cursor.key_range, cursor.reverse) != (store_name, key_range, reverse):
        raise PageTokenError(
            "page_token belongs to another query: repeat the first request's store, from, to, prefix and "
            "reverse with it"
        )
    return cursor


def token_ordered(store) -> bool:
    """Global stores page in token order; partitioned ones in key order."""
    return not store.spec.store_type.partitioned


def raw_entries(store, cursor: Cursor, count: int):
    """Up to `count` raw entries (with .key and .value bytes) after the cursor, those past the
    store's retention left out (statestore.core.retention)."""
    table, session = store.table, store.session
    if not token_ordered(store):
        rest = cursor.key_range if cursor.after is None else cursor.key_range.after(cursor.after, cursor.reverse)
        rows = table.scan(session, rest, cursor.reverse, min(count, _PARTITION_PAGE_ROWS))
        return list(islice(store.unexpired(rows), count))
    if cursor.key_range != EVERYTHING:
        table.scan(session, cursor.key_range)  # raises the store type's own "not supported, use ..." error
    if cursor.reverse:
        raise UnsupportedOperationError(
            f"store '{store.spec.name}' is a {store.spec.store_type.value} store: its entries page in token "
            "(hash) order, which has no reverse. Leave reverse out, or read the whole store sorted with "
            "`statestore all --reverse`"
        )
    rows = table.scan_unordered(session, cursor.after, min(count, _TOKEN_PAGE_ROWS))
    return list(islice(store.unexpired(rows), count))


def read_page(store, cursor: Cursor, limit: int) -> tuple[list, str | None]:
    """(up to `limit` raw entries, the token of the next page or None when the scan is done)."""
    entries = raw_entries(store, cursor, limit + 1)
    if len(entries) <= limit:
        return entries, None
    entries = entries[:limit]
    following = Cursor(cursor.store, cursor.key_range, cursor.reverse, entries[-1].key)
    return entries, encode_token(following)


# Windows and sessions, by position.

Position = tuple[bytes, tuple[int, ...]]  # a row's raw key and its times, in the store's order


@dataclass(frozen=True)
class WindowQuery:
    """What a page request asks: the store, one key's windows (raw bytes) or every key's, and
    the window starts in [time_from, time_to]."""

    store: str
    key: bytes | None
    time_from: int
    time_to: int


def encode_window_token(query: WindowQuery, last: Position) -> str:
    return _encode(
        {
            "s": query.store,
            "k": None if query.key is None else query.key.hex(),
            "f": query.time_from,
            "t": query.time_to,
            "a": [last[0].hex(), list(last[1])],
        }
    )


def _query_and_position_of(body: Any) -> tuple[WindowQuery, Position]:
    asked = WindowQuery(body["s"], None if body["k"] is None else bytes.fromhex(body["k"]), body["f"], body["t"])
    key_hex, times = body["a"]
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in times):
        raise ValueError("bad times")
    return asked, (bytes.fromhex(key_hex), tuple(times))


def resume_window(query: WindowQuery, token: str | None) -> Position | None:
    """The position a request's page_token continues after; None without a token."""
    if token is None:
        return None
    asked, after = _decode(token, _query_and_position_of)
    if asked != query:
        raise PageTokenError("page_token belongs to another query: repeat the first request's store, key, from and to")
    return after


def read_window_page(
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
    return page[:limit], encode_window_token(query, position(page[limit - 1]))
