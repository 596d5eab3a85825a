"""How many bytes a row takes in an SSTable, from its values (pure).

A model of Cassandra's row serialization (the `oa`/`nb` formats of 4.x and 5.0, before
compression), close enough to compare with what Cassandra reports per partition
(`nodetool tablehistograms`, `system_views.max_partition_size`): per row a flags byte, the
clustering values, the row and previous-row sizes, the row timestamp as a delta (a few
bytes), and per cell a flags byte and the value, variable-length values with their length.
"""

from __future__ import annotations

from datetime import datetime

# Fixed-width CQL types, in bytes.
_FIXED = {"bigint": 8, "timestamp": 8, "double": 8, "int": 4, "float": 4, "boolean": 1, "uuid": 16, "timeuuid": 16}
# Row flags (1) + the two row-size varints (~2) + the timestamp delta varint (~4 for
# microsecond timestamps minutes to days apart).
_ROW_FIXED = 7
# Partition header: key length (2), deletion time (~12), end-of-partition marker (1).
_PARTITION_FIXED = 15


def vint_size(value: int) -> int:
    """Bytes of Cassandra's unsigned variable-length integer encoding of `value`."""
    value = max(0, int(value))
    magnitude = 64 - (value | 1).bit_length()  # Long.numberOfLeadingZeros(value | 1)
    return (639 - magnitude * 9) >> 6


def value_bytes(value, cql_type: str) -> int:
    """Serialized bytes of one non-null value: fixed width, or a length varint plus the bytes."""
    if cql_type in _FIXED:
        return _FIXED[cql_type]
    if isinstance(value, bytes | bytearray | memoryview):
        size = len(value)
    elif isinstance(value, str):
        size = len(value.encode("utf-8"))
    elif isinstance(value, datetime):
        size = 8
    else:
        size = len(str(value).encode("utf-8"))
    return vint_size(size) + size


def row_bytes(clustering: list[tuple[object, str]], cells: list[tuple[object, str]]) -> int:
    """One row: `clustering` and `cells` are (value, CQL type) pairs; None cells are absent."""
    size = _ROW_FIXED
    if clustering:
        size += 1 + sum(value_bytes(v, t) for v, t in clustering)  # + the null/empty header
    present = [(v, t) for v, t in cells if v is not None]
    if len(present) < len(cells):
        size += 1  # the bitmap of which columns the row has
    return size + sum(1 + value_bytes(v, t) for v, t in present)


def partition_overhead(key_values: list[tuple[object, str]]) -> int:
    """The partition's header and end marker, with its serialized key."""
    return _PARTITION_FIXED + sum(value_bytes(v, t) for v, t in key_values)
