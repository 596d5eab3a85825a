"""Many rows written as prepared UNLOGGED batches: the write path of the stream's apply.

A batch assembled in the driver (`BatchStatement.add` once per row) costs every row a bound
statement of its own in the driver's Python, and Cassandra a prepared-statement lookup and a
bind per row. A batch *prepared* as one statement of n INSERTs binds one flat list of values:
on the local stack, 200,000 rows in batches of 64 took 14.7 µs per row instead of 64.8
(bench/write_path.py, BENCHMARKS.md). Batches are powers of two long (tables.base.write_batches cuts them so,
carrying the rest into the next batch; a group of any other length is cut here), so a table has
at most seven such statements per timestamp mode, prepared once per session.

Only for rows that need no atomicity across a batch's cut: a key-value entry or a window is one
row. The versioned and session tables, whose changes span rows that must land together, build
their batches row by row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache

from cassandra.concurrent import execute_concurrent

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


def write_unlogged(
    session, profile, insert_cql: str, groups: Iterable[Sequence[tuple]], concurrency: int, write_ts: int | None
) -> None:
    """Write every group's rows (each group one partition's, or one coordinator's) as prepared
    UNLOGGED batches, `concurrency` requests in flight; the first error is raised."""
    execute_concurrent(
        session,
        execution_profile=profile,
        statements_and_parameters=batch_work(session, insert_cql, groups, write_ts),
        concurrency=concurrency,
        raise_on_first_error=True,
    )
