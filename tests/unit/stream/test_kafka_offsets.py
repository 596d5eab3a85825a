"""Kafka offsets as a typed value (registry.KafkaOffsets): parsed once from Spark's JSON, equal
whatever the JSON's spacing or order, and written back as the compact sorted text the registry
keeps and the Kafka source takes."""

from __future__ import annotations

import pytest

from statestore.store.book.registry import KafkaOffsets


def test_spark_json_comes_back_compact_with_sorted_keys():
    offsets = KafkaOffsets.parse('{"words": {"10": 7, "2": 40}, "lines": {"0": 1}}')
    assert offsets.as_json() == '{"lines":{"0":1},"words":{"10":7,"2":40}}'  # partitions sort as strings
    assert offsets.topics == ("lines", "words")
    assert KafkaOffsets.parse(offsets.as_json()) == offsets


def test_offsets_compare_by_what_they_name_not_by_their_text():
    assert KafkaOffsets.parse('{"t":{"1":4,"0":3}}') == KafkaOffsets.parse('{"t": {"0": 3, "1": 4}}')
    assert KafkaOffsets.parse('{"t":{"0":3}}') != KafkaOffsets.parse('{"t":{"0":4}}')


@pytest.mark.parametrize("text", ['["t"]', '{"t": 3}', "7"])
def test_anything_but_offsets_per_topic_and_partition_is_refused(text):
    with pytest.raises(ValueError):
        KafkaOffsets.parse(text)


def test_a_registry_column_without_offsets_is_none():
    assert KafkaOffsets.parse_stored(None) is None
    assert KafkaOffsets.parse_stored("") is None
