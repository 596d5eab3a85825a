"""latest: the field's value in the key's latest record, by event time, then Kafka partition,
then offset (a total order, so a replay and a merge pick the same record)."""

from __future__ import annotations

import json
import struct
from typing import NamedTuple

from statestore.core.aggregation.kinds.base import ANY_VALUE, Kind

_HEAD = struct.Struct(">qiq")


class LatestValue(NamedTuple):
    """The accumulator: where the value was, and its JSON text."""

    time_ms: int
    partition: int
    offset: int
    json: str


class Latest(Kind):
    name = "latest"
    takes = ANY_VALUE
    idempotent = True

    def identity(self) -> LatestValue | None:
        return None

    def partial_sql(self, column: str) -> str:
        # Structs compare field by field: the latest time, then partition, then offset wins.
        return f"max(struct(time_ms, partition, offset, {column}))"

    def from_partial(self, value) -> LatestValue | None:
        if value is None:
            return None
        time_ms, partition, offset, text = value
        return LatestValue(int(time_ms), int(partition), int(offset), str(text))

    def merge(self, left: LatestValue | None, right: LatestValue | None) -> LatestValue | None:
        if left is None:
            return right
        if right is None:
            return left
        return max(left, right)

    def finish(self, accumulator: LatestValue | None):
        return None if accumulator is None else json.loads(accumulator.json)

    def _encode(self, accumulator: LatestValue | None) -> bytes:
        if accumulator is None:
            return b""
        return _HEAD.pack(accumulator.time_ms, accumulator.partition, accumulator.offset) + accumulator.json.encode()

    def _decode(self, data: bytes) -> LatestValue | None:
        if not data:
            return None
        time_ms, partition, offset = _HEAD.unpack_from(data)
        return LatestValue(time_ms, partition, offset, data[_HEAD.size :].decode("utf-8"))
