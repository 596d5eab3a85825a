"""Continuation tokens and pages of the HTTP API, over in-memory tables with the scan contract of
statestore.store.tables (the real tables are exercised by tests/integration/http/test_http_api.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import EVERYTHING, Entry, KeyRange, StoreSpec, StoreType
from statestore.http.paging import Cursor, PageTokenError, decode_token, encode_token, read_page, resume

keys = st.binary(min_size=1, max_size=6)
ranges = st.builds(KeyRange, st.none() | keys, st.none() | keys, st.booleans(), st.booleans())


class MemoryTable:
    """Sorted scans like a partitioned table; token order (a fixed permutation) like a global one."""

    def __init__(self, data: dict[bytes, bytes], global_: bool) -> None:
        self.data = data
        self.global_ = global_
        self.calls: list[tuple] = []

    @staticmethod
    def _token(key: bytes) -> tuple:
        return (hash(key) & 0xFFFF, key)  # stable within a run, not key order

    def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000):
        self.calls.append(("scan", key_range, reverse, page_size))
        if self.global_ and key_range != EVERYTHING:
            raise UnsupportedOperationError("global: no ranges, use all()")
        chosen = sorted((k for k in self.data if key_range.contains(k)), reverse=reverse)
        return (Entry(k, self.data[k]) for k in chosen)

    def scan_unordered(self, session, after=None, page_size=5000):
        ordered = sorted(self.data, key=self._token)
        if after is not None:
            ordered = [k for k in ordered if self._token(k) > self._token(after)]
        return (Entry(k, self.data[k]) for k in ordered)


@dataclass
class MemoryStore:
    spec: StoreSpec
    table: MemoryTable
    session: object = None

    def unexpired(self, entries):
        return iter(entries)  # no retention (the HTTP test of retention runs on the real stack)


def _store(data: dict[bytes, bytes], store_type: StoreType) -> MemoryStore:
    spec = StoreSpec("ks", "mem", store_type, 3 if store_type.partitioned else 1)
    return MemoryStore(spec, MemoryTable(data, not store_type.partitioned))


def _all_pages(store, key_range, reverse, limit) -> list[list[bytes]]:
    pages, token = [], None
    while True:
        entries, token = read_page(store, resume("mem", key_range, reverse, token), limit)
        pages.append([e.key for e in entries])
        if token is None:
            return pages


@given(st.text(min_size=1, max_size=20), ranges, st.booleans(), st.none() | keys)
def test_token_round_trip(store, key_range, reverse, after):
    if after is not None and not key_range.contains(after):
        after = None
    cursor = Cursor(store, key_range, reverse, after)
    token = encode_token(cursor)
    assert token.isascii() and "=" not in token and "/" not in token and "+" not in token  # URL-safe as is
    assert decode_token(token) == cursor


@settings(max_examples=200)
@given(st.dictionaries(keys, keys, max_size=40), ranges, st.booleans(), st.integers(1, 12))
def test_pages_of_an_ordered_store_concatenate_to_the_scan(data, key_range, reverse, limit):
    store = _store(data, StoreType.PARTITIONED_KV)
    pages = _all_pages(store, key_range, reverse, limit)
    expected = sorted((k for k in data if key_range.contains(k)), reverse=reverse)
    assert [k for page in pages for k in page] == expected
    assert all(len(page) == limit for page in pages[:-1]) and len(pages[-1]) <= limit
    # Each page asks for one entry more than it returns (to know whether another page follows), no more.
    assert all(call[3] <= limit + 1 for call in store.table.calls)


@settings(max_examples=100)
@given(st.dictionaries(keys, keys, max_size=40), st.integers(1, 12))
def test_pages_of_a_global_store_cover_it_once_in_token_order(data, limit):
    store = _store(data, StoreType.GLOBAL_KV)
    pages = _all_pages(store, EVERYTHING, False, limit)
    served = [k for page in pages for k in page]
    assert served == sorted(data, key=MemoryTable._token)
    assert all(len(page) == limit for page in pages[:-1])


def test_a_global_store_refuses_ranges_and_reverse_with_the_store_types_message():
    store = _store({b"a": b"1"}, StoreType.GLOBAL_KV)
    with pytest.raises(UnsupportedOperationError, match="global: no ranges"):
        read_page(store, Cursor("mem", KeyRange.prefix(b"a"), False), 10)
    with pytest.raises(UnsupportedOperationError, match="token \\(hash\\) order, which has no reverse"):
        read_page(store, Cursor("mem", EVERYTHING, True), 10)


@pytest.mark.parametrize(
    "token",
    ["", "!!!", "zzz", "eyJ4IjoxfQ", encode_token(Cursor("mem", EVERYTHING, False))[:-3] + "AAA", "x" * 5000],
)
def test_malformed_tokens_are_refused(token):
    with pytest.raises(PageTokenError, match="not one this API issued"):
        decode_token(token)


def test_a_token_of_another_query_is_refused():
    token = encode_token(Cursor("mem", KeyRange.prefix(b"ab"), False, b"ab1"))
    assert resume("mem", KeyRange.prefix(b"ab"), False, token).after == b"ab1"
    for other in [
        ("mem", EVERYTHING, False),
        ("mem", KeyRange.prefix(b"ab"), True),
        ("other", KeyRange.prefix(b"ab"), False),
    ]:
        with pytest.raises(PageTokenError, match="belongs to another query"):
            resume(*other, token)


def test_a_token_continuing_outside_its_range_is_refused():
    token = encode_token(Cursor("mem", KeyRange(b"a", b"c"), False, b"z"))
    with pytest.raises(PageTokenError, match="outside its own range"):
        decode_token(token)


def test_reading_a_page_stops_after_limit_plus_one_entries():
    consumed = []

    class Counting(MemoryTable):
        def scan(self, session, key_range=EVERYTHING, reverse=False, page_size=5000):
            for entry in super().scan(session, key_range, reverse, page_size):
                consumed.append(entry.key)
                yield entry

    store = MemoryStore(
        StoreSpec("ks", "mem", StoreType.PARTITIONED_KV, 2), Counting({bytes([i]): b"" for i in range(1, 100)}, False)
    )
    entries, token = read_page(store, Cursor("mem", EVERYTHING, False), 10)
    assert len(entries) == 10 and len(consumed) == 11 and decode_token(token).after == bytes([10])
    assert entries[0].key == b"\x01"
