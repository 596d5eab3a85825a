"""Many rows written as prepared UNLOGGED batches: the write path of the stream's apply.

A batch assembled in the driver (`BatchStatement.add` once per row) costs every row a bound
statement of its own in the driver's Python, and Cassandra a prepared-statement lookup and a
bind per row. A batch *prepared* as one statement of n INSERTs binds one flat list of values
(measured by bench/micro/write_path.py). Batches are powers of two long (tables.base.write_batches
cuts them so, carrying the rest into the next batch; a group of any other length is cut here),
so a table has at most seven such statements per timestamp mode, prepared once per session.

The values are serialised here, not by `PreparedStatement.bind`, whose per-value column
descriptor and column-encryption lookup cost more than the value itself
(bench/micro/apply_costs.py). `bind_serialized` gives exactly the bytes bind gives (unit-tested
against it) and leaves to the driver any value it has no fast way for, and every statement under
a column-encryption policy.

Only for "rows" that need no atomicity across a batch's cut: a key-value entry, a window, or a
session change that adds one session and deletes none is one row; a session change that
replaces one session by one in the same partition is one "row" of two statements (a DELETE and
an INSERT), never cut apart, in a single-partition batch, which lands whole. Rows that must land
together otherwise (a session change adding several sessions of one partition) go as groups
atomic_batches builds, which write_unlogged never cuts. The versioned table, and the session
table's other changes, build their batches row by row.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache

from cassandra.concurrent import execute_concurrent
from cassandra.query import UNSET_VALUE, BoundStatement

from statestore.conn.cassandra import prepare


def power_of_two_sizes(rows: int) -> Iterator[int]:
    """`rows` as a sum of distinct powers of two, largest first (37 -> 32, 4, 1)."""
    size = 1 << max(rows.bit_length() - 1, 0)
    while rows:
        if size <= rows:
            yield size
            rows -= size
        size >>= 1


@lru_cache(maxsize=256)  # a few sizes per table: built once, not once per batch
def batch_cql(insert_cql: str, rows: int, timestamped: bool) -> str:
    """One UNLOGGED batch of `rows` copies of `insert_cql`; its timestamp, if any, is the
    batch's first bind marker (every row gets it)."""
    using = " USING TIMESTAMP ?" if timestamped else ""
    return f"BEGIN UNLOGGED BATCH{using} " + " ".join(f"{insert_cql};" for _ in range(rows)) + " APPLY BATCH"


def batch_work(
    session, insert_cql: str, groups: Iterable[Sequence[tuple]], write_ts: int | None
) -> list[tuple[object, list]]:
    """(statement, values) of each batch: every group of row value tuples, cut into
    power-of-two batches, at `write_ts` microseconds (None: the server's clock)."""
    stamp = [] if write_ts is None else [write_ts]
    work = []
    for group in groups:
        start = 0
        for size in power_of_two_sizes(len(group)):
            statement = prepare(session, batch_cql(insert_cql, size, write_ts is not None))
            statement.is_idempotent = True  # every row is an upsert of absolute values
            values = list(stamp)
            for row in group[start : start + size]:
                values.extend(row)
            work.append((statement, values))
            start += size
    return work


_INT32 = struct.Struct(">i").pack
_INT64 = struct.Struct(">q").pack
# CQL type name -> (the Python type taking the fast way, how it is packed). A timestamp bound
# as an int is milliseconds since the epoch, packed as the driver packs it.
_FAST_WAYS: dict[str, tuple[type, Callable[[object], bytes]]] = {
    "blob": (bytes, lambda value: value),
    "int": (int, _INT32),
    "bigint": (int, _INT64),
    "timestamp": (int, _INT64),
}


def value_serializer(cql_type, protocol_version: int) -> Callable[[object], object]:
    """One column's serialisation, as BoundStatement.bind does it: None and UNSET_VALUE pass
    through; a value of the column's fast type is packed here; anything else (a datetime, a
    bytearray, a value out of range, a wrong type) goes to the driver's own serialize."""
    exact, pack = _FAST_WAYS.get(cql_type.typename, (None, None))

    def serialize(value):
        if value is None or value is UNSET_VALUE:
            return value
        if type(value) is exact:
            try:
                return pack(value)
            except struct.error:
                pass  # out of range: left to the driver, whose bind then names the column
        return cql_type.serialize(value, protocol_version)

    return serialize


def bind_serialized(statement, values: list) -> BoundStatement:
    """`statement` bound to `values`, giving the same bytes as `statement.bind(values)` (which
    it uses under a column-encryption policy, or when the count of values does not match)."""
    columns = statement.column_metadata
    if statement.column_encryption_policy is not None or len(values) != len(columns):
        return statement.bind(values)
    serializers = _SERIALIZERS.get(statement)
    if serializers is None:
        serializers = _SERIALIZERS[statement] = _serializers_of(statement)
    try:
        serialized = [serialize(value) for serialize, value in zip(serializers, values, strict=True)]
    except (TypeError, struct.error):
        return statement.bind(values)  # raises the driver's error, naming the column
    bound = BoundStatement(statement)
    bound.raw_values = values
    bound.values = serialized
    return bound


# Each prepared batch statement's serialisers, one per bind marker, found once per statement
# (not again per batch, on every row's path) and gone with the statement.
_SERIALIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _serializers_of(statement) -> tuple[Callable[[object], object], ...]:
    types = [column.type for column in statement.column_metadata]
    by_type = {cql_type: value_serializer(cql_type, statement.protocol_version) for cql_type in set(types)}
    return tuple(by_type[cql_type] for cql_type in types)


def atomic_batches(atoms: Sequence[Sequence[tuple]], fillers: Sequence[tuple], max_rows: int) -> Iterator[list[tuple]]:
    """Pure: one partition's rows as the groups write_unlogged writes, no atom cut. `atoms`:
    rows that must land together (each at most `max_rows` rows); `fillers`: rows that need not.
    Atoms go in order into groups of at most `max_rows` rows, each topped up with fillers to a
    power of two (write_unlogged then sends it as one batch statement of that length) or, with
    no filler left, padded with its own last row again: an upsert of the same values at the
    same timestamp, one write. The fillers left follow, `max_rows` at a time (write_unlogged
    cuts those, which is harmless for rows that need not land together)."""
    fillers = list(fillers)
    group: list[tuple] = []

    def topped_up() -> list[tuple]:
        size = 1 << (len(group) - 1).bit_length()
        take = min(size - len(group), len(fillers))
        full = group + fillers[len(fillers) - take :]
        del fillers[len(fillers) - take :]
        return full + [full[-1]] * (size - len(full))

    for atom in atoms:
        if not 0 < len(atom) <= max_rows:
            raise ValueError(f"an atom of {len(atom)} rows does not fit a batch of at most {max_rows}")
        if len(group) + len(atom) > max_rows:
            yield topped_up()
            group = []
        group.extend(atom)
    if group:
        yield topped_up()
    for start in range(0, len(fillers), max_rows):
        yield fillers[start : start + max_rows]


def write_unlogged(
    session, profile, insert_cql: str, groups: Iterable[Sequence[tuple]], concurrency: int, write_ts: int | None
) -> None:
    """Write every group's rows (each group one partition's, or one coordinator's) as prepared
    UNLOGGED batches, `concurrency` requests in flight; the first error is raised."""
    execute_concurrent(
        session,
        execution_profile=profile,
        statements_and_parameters=[
            (bind_serialized(statement, values), None)
            for statement, values in batch_work(session, insert_cql, groups, write_ts)
        ],
        concurrency=concurrency,
        raise_on_first_error=True,
    )
