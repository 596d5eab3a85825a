"""Where a store's very first batch starts, from Spark's initial-offsets file in the checkpoint."""

from __future__ import annotations

import pytest

from statestore.store.book.registry import KafkaOffsets
from statestore.stream.checkpoint import parse_initial_offsets, starts_batch


def test_the_file_spark_writes_gives_its_offsets_as_compact_sorted_json():
    lines = ["\x00v1", '{"words":{"1":40,"0":12}}']
    assert parse_initial_offsets(lines).as_json() == '{"words":{"0":12,"1":40}}'


@pytest.mark.parametrize(
    "lines",
    [
        [],
        ["\x00v1"],
        ["{}", '{"words":{"0":1}}'],  # no version line
        ["\x00v1", "not json"],
        ["\x00v1", '["words"]'],
        ["\x00v1", '{"words":{"0":-2}}'],  # earliest, unresolved
        ["\x00v1", '{"words":{"0":"12"}}'],
        ["\x00v1", '{"words":{"0":true}}'],
    ],
)
def test_anything_else_is_not_taken(lines):
    assert parse_initial_offsets(lines) is None


def test_a_start_fits_an_end_with_the_same_partitions_none_behind():
    parse = KafkaOffsets.parse
    assert starts_batch(parse('{"w":{"0":3,"1":0}}'), parse('{"w":{"0":9,"1":0}}'))
    assert not starts_batch(parse('{"w":{"0":3}}'), parse('{"w":{"0":9,"1":4}}'))  # a partition added since
    assert not starts_batch(parse('{"w":{"0":3}}'), parse('{"w":{"0":9},"x":{"0":1}}'))  # a topic added since
    assert not starts_batch(parse('{"w":{"0":10}}'), parse('{"w":{"0":9}}'))
