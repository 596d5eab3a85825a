"""Pages of a scan and their continuation tokens.

A token is opaque to clients: URL-safe base64 of a small JSON object naming the store, the key
range and direction of the scan, and the raw key the page ended with. The next page continues
strictly after that key:

- stores with ordered keys (partitioned types) scan `KeyRange.after(last_key)`, every store
  partition read concurrently and merged in key byte order;
- global stores page through the whole store in Cassandra's token order (hash order: stable
  while the store is unchanged, but not sorted) with `token(key) > token(last_key)`; they have
  no range, prefix or reverse paging, since any of those would read the whole table per page.

Keys written after a page was read appear on a later page only if they sort after its last
key (no snapshot across pages), as with any cursor over a live store.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from itertools import islice
from typing import Any

from statestore.core.errors import StateStoreError, UnsupportedOperationError
from statestore.core.model import EVERYTHING, KeyRange

# Rows asked of each store partition per round trip: enough for most pages in one, and a
# bounded read-ahead when a page spans many partitions.
_PARTITION_PAGE_ROWS = 1000
_TOKEN_PAGE_ROWS = 5000


class PageTokenError(StateStoreError, ValueError):
    """A page_token that is malformed or belongs to another query."""


@dataclass(frozen=True)
class Cursor:
    """Where a scan stands: its store, range, direction and the last key served (None: start)."""

    store: str
    key_range: KeyRange
    reverse: bool
    after: bytes | None = None


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def encode_token(cursor: Cursor) -> str:
    r = cursor.key_range
    body = {
        "s": cursor.store,
        "r": [_hex(r.lower), _hex(r.upper), r.lower_inclusive, r.upper_inclusive],
        "d": cursor.reverse,
        "a": _hex(cursor.after),
    }
    raw = json.dumps(body, separators=(",", ":")).encode("ascii")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_token(token: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
        lower, upper, lower_inclusive, upper_inclusive = body["r"]
        flags = (lower_inclusive, upper_inclusive, body["d"])
        if not all(isinstance(flag, bool) for flag in flags) or not isinstance(body["s"], str):
            raise ValueError("bad field types")
        key_range = KeyRange(_unhex(lower), _unhex(upper), lower_inclusive, upper_inclusive)
        after = _unhex(body["a"])
        cursor = Cursor(body["s"], key_range, body["d"], after)
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        raise PageTokenError(
            f"page_token {token[:40]!r} is not one this API issued: pass next_page_token exactly as returned, "
            "or leave page_token out to start from the beginning"
        ) from None
    if after is not None and not key_range.contains(after):
        raise PageTokenError("page_token continues after a key outside its own range: it was altered")
    return cursor


def _unhex(text: Any) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError("not hex text")
    return bytes.fromhex(text)


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
    """Up to `count` raw entries (with .key and .value bytes) after the cursor."""
    table, session = store.table, store.session
    if not token_ordered(store):
        rest = cursor.key_range if cursor.after is None else cursor.key_range.after(cursor.after, cursor.reverse)
        rows = table.scan(session, rest, cursor.reverse, min(count, _PARTITION_PAGE_ROWS))
        return list(islice(rows, count))
    if cursor.key_range != EVERYTHING:
        table.scan(session, cursor.key_range)  # raises the store type's own "not supported, use ..." error
    if cursor.reverse:
        raise UnsupportedOperationError(
            f"store '{store.spec.name}' is a {store.spec.store_type.value} store: its entries page in token "
            "(hash) order, which has no reverse. Leave reverse out, or read the whole store sorted with "
            "`statestore all --reverse`"
        )
    return list(islice(table.scan_unordered(session, cursor.after, min(count, _TOKEN_PAGE_ROWS)), count))


def read_page(store, cursor: Cursor, limit: int) -> tuple[list, str | None]:
    """(up to `limit` raw entries, the token of the next page or None when the scan is done)."""
    entries = raw_entries(store, cursor, limit + 1)
    if len(entries) <= limit:
        return entries, None
    entries = entries[:limit]
    following = Cursor(cursor.store, cursor.key_range, cursor.reverse, entries[-1].key)
    return entries, encode_token(following)
