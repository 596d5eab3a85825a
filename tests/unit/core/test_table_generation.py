"""The table generations a store moves through (names.table_generation, next_generation_table):
a reset under a batch in flight (global, window, session stores) and a re-layout."""

from __future__ import annotations

from statestore.core.names import next_generation_table, store_table, table_generation


def test_a_table_names_its_base_and_generation():
    assert table_generation("words_store") == ("words_store", 0)
    assert table_generation("words_store_r1") == ("words_store", 1)
    assert table_generation("words_store_r12") == ("words_store", 12)
    assert table_generation("a_r1_store") == ("a_r1_store", 0)  # only a trailing suffix counts
    assert table_generation("words_store_r0") == ("words_store_r0", 0)  # generations start at 1


def test_the_next_generation_follows_the_last_and_fits_a_table_name():
    assert next_generation_table("words_store") == "words_store_r1"
    assert next_generation_table("words_store_r9") == "words_store_r10"
    longest = store_table("s" * 32)  # 38 characters: generations up to 10 ** 8 - 1 still fit in 48
    assert next_generation_table(f"{longest}_r99999998") == f"{longest}_r99999999"
    assert next_generation_table(f"{longest}_r99999999") is None
