"""book.dropped.table_after: a store created again under a dropped store's name starts past
every table generation the dropped stores used, whatever order they were used in."""

from __future__ import annotations

import pytest

from statestore.core.errors import InvalidNameError
from statestore.store.book.dropped import table_after


def test_a_name_never_dropped_keeps_its_first_table():
    """No dropped store of the name (another's do not count): the first table, as before."""
    assert table_after("s_store", []) == "s_store"
    assert table_after("s_store", ["other_store", "other_store_r4"]) == "s_store"


@pytest.mark.parametrize(
    ("used", "expected"),
    [
        (["s_store"], "s_store_r1"),
        (["s_store", "s_store_r1", "s_store_r2"], "s_store_r3"),
        (["s_store_r7", "s_store"], "s_store_r8"),  # a relayout's old tables, any order
        (["s_store_r2"], "s_store_r3"),  # the first table dropped earlier by hand
    ],
)
def test_a_name_dropped_starts_past_the_highest_generation_used(used, expected):
    """Past the highest, not past the first: a late attempt may hold any of them."""
    assert table_after("s_store", used) == expected


def test_a_later_generation_asked_for_is_kept_when_no_dropped_store_reached_it():
    """A spec already past every dropped table is left as it is."""
    assert table_after("s_store_r5", ["s_store", "s_store_r1"]) == "s_store_r5"


def test_no_generation_left_under_48_characters_is_a_clear_error():
    """Cassandra's 48-character limit: refused before anything is created, naming the way out."""
    base = "s" * 32 + "_store"  # 38 characters: generations up to 8 digits fit
    with pytest.raises(InvalidNameError, match="create the store under another name"):
        table_after(base, [f"{base}_r99999999"])
