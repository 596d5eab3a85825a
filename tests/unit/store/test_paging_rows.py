"""Rows of a scan into Entries: the fast time conversion equals statestore.core.codecs.millis_of."""

from __future__ import annotations

from collections import namedtuple
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from statestore.core.codecs import millis_of
from statestore.core.model import Entry
from statestore.store.tables.base import entry_from_row

Row = namedtuple("Row", "key value batch_id time")


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
def test_row_time_converts_to_the_same_milliseconds_as_millis_of(moment):
    entry = entry_from_row(Row(b"k", b"v", 7, moment))
    assert entry == Entry(b"k", b"v", 7, millis_of(moment))


def test_rows_without_time_or_batch():
    assert entry_from_row(Row(b"k", b"v", None, None)) == Entry(b"k", b"v", None, None)
    before_epoch = datetime(1969, 12, 31, 23, 59, 59, 999_999)
    assert entry_from_row(Row(b"k", b"", None, before_epoch)).time_ms == -1  # floor, as millis_of
    assert entry_from_row(Row(b"k", b"", None, datetime(1970, 1, 1) + timedelta(microseconds=1500))).time_ms == 1
