"""The replay-safe apply of one micro-batch's (word, pane, from) deltas to a window store kept
as panes (statestore.core.windows, WindowSpec.panes; the stream's rows: windowed.pane_deltas).

The rule is apply_windows', per pane row (key, pane, from): batch B skips a row already
written by B or later and writes old + delta with batch_id = B to any other, as an absolute
value. A replay of B has the same records and stream time, so the same panes and `from`s, and
completes exactly the rows the first attempt did not reach. It runs as the key-value plan's
arrays (statestore.stream.plan) over keys that name a pane row: its `from`, its pane, then
the key (`pane_cache_key`, 8-byte big-endian each).

Panes after the stream time are not read: a row the stream wrote holds records of its pane,
each at or after the pane's start and at or before the store's stream time, so no such row
has a pane after it. As apply_windows, used only with the cache on (the stream the store's
only writer besides the expire job; statestore.stream.batch_apply).

The apply cache serves pane rows by `pane_cache_key`. `from` first: a batch writes rows whose
`from` is at least the first window open at its stream time (WindowSpec.pane_from), and the
stream time only grows, so the rows no batch writes again are one prefix of a bucket's file,
forgotten when a task opens it (`forget_closed_panes`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Protocol

from statestore.core.config import CassandraConfig
from statestore.core.model import PaneEntry, StoreSpec
from statestore.store.tables import window_table_for
from statestore.stream.apply import ApplyStats, Delta, Timer, sliced, slices_applier
from statestore.stream.apply_cache import BucketCache, CachePlan, bucket_expression
from statestore.stream.apply_windows import TimedRows, apply_rows, plan_rows
from statestore.stream.plan import SlicePlan

PaneKey = tuple[bytes, int, int]  # (key, pane start, from)
_LONG = struct.Struct(">q")
_FROM_PANE = struct.Struct(">qq")
# The apply's grouping key of a paned store's rows: Spark's hash partitioning of it is the bucket.
PANE_COLUMNS = ("word", "pane_start", "from_start")


class PaneRows(Protocol):
    """The I/O of a pane apply: the real table (PanedWindowTable), or the protocol simulator's
    fake (tests/simulation/windows.py)."""

    def read_panes(self, session, rows: list[PaneKey], concurrency: int) -> dict[PaneKey, PaneEntry]:
        """The stored rows among (key, pane, from) triples; missing ones are absent (a Found,
        telling the rows that carry a TTL, when the reader can tell)."""

    def write_panes(self, session, entries: list[PaneEntry], concurrency: int, write_ts: int | None) -> None:
        """Upsert the rows' absolute values at `write_ts`."""


def pane_cache_key(key: bytes, pane_ms: int, from_ms: int) -> bytes:
    """The plan's and the apply cache's key of `key`'s row of pane `pane_ms` from `from_ms`
    (both 0 or more, so bytewise order is `from` order): `from`, the pane, then the key."""
    return _FROM_PANE.pack(from_ms, pane_ms) + key


def pane_row_of(cache_key: bytes) -> PaneKey:
    """(key, pane, from) of a pane_cache_key."""
    from_ms, pane_ms = _FROM_PANE.unpack_from(cache_key)
    return cache_key[_FROM_PANE.size :], pane_ms, from_ms


PANE_ROWS = TimedRows(pane_row_of, pane_cache_key, PaneEntry, lambda row: row[1])


def plan_pane_slice(stored: Sequence[bytes | None], deltas: Sequence[Delta], batch_id: int) -> tuple[list, SlicePlan]:
    """Pure: the pane rows batch `batch_id` writes for deltas keyed by pane_cache_key over their
    rows' stored records (None: absent), and the plan itself (its records as the cache keeps them)."""
    return plan_rows(PANE_ROWS, stored, deltas, batch_id)


def apply_pane_deltas(
    session,
    spec: StoreSpec,
    batch_id: int,
    deltas: list[Delta],
    concurrency: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: BucketCache | None = None,
    table: PaneRows | None = None,
) -> ApplyStats:
    """Apply deltas keyed by pane_cache_key (apply_windows.apply_rows: panes after the stream
    time not read). `table`: the rows' I/O (None: the store's table, window_table_for, noting
    TTLs with `cache`)."""
    if not deltas:
        return ApplyStats()
    if table is None:
        table = window_table_for(spec) if cache is None else window_table_for(spec).noting_ttl()
    return apply_rows(
        PANE_ROWS,
        lambda rows: table.read_panes(session, rows, concurrency),
        lambda entries: table.write_panes(session, entries, concurrency, write_ts),
        batch_id,
        deltas,
        timer,
        stream_time_ms,
        cache,
    )


def pane_deltas_of(rows: Iterable) -> Iterator[list[Delta]]:
    """A task's rows of (word, delta, last_ms, pane_start, from_start[, bucket]) as slices of
    deltas keyed by pane_cache_key (apply.sliced)."""
    pack = _FROM_PANE.pack
    return sliced(
        Delta(
            pack(int(row[4]), int(row[3])) + row[0].encode("utf-8"),
            int(row[1]),
            row[2],
            row[5] if len(row) > 5 else None,
        )
        for row in rows
    )


def with_pane_buckets(df, buckets: int | None):
    """`df` (pane_deltas' rows) with each row's apply-cache bucket as its last column, `bucket`
    (None: `df` as it is): Spark's hash partitioning of the apply's grouping key (PANE_COLUMNS),
    so a task holds one bucket (apply.with_buckets' rule for pane rows)."""
    if buckets is None:
        return df
    from pyspark.sql import functions as F

    return df.withColumn("bucket", F.expr(bucket_expression(buckets, PANE_COLUMNS)))


def pane_applier(
    config: CassandraConfig,
    spec: StoreSpec,
    batch_id: int,
    write_ts: int,
    timer: Timer | None = None,
    stream_time_ms: int | None = None,
    cache: CachePlan | None = None,
):
    """A function over one task's rows of (word, delta, last_ms, pane_start, from_start[,
    bucket]), run by statestore.stream.apply.run_applier: bounded slices, each retried on
    transient Cassandra errors within the retry budget (repeating a slice is safe).
    `stream_time_ms`: the store's stream time at the batch's start, when no pane after it needs
    reading (None: every row is read). `cache`: the batch's apply-cache plan (rows then carry
    their bucket); a file opened forgets the rows no batch writes again (forget_closed_panes)."""
    apply = partial(apply_pane_deltas, stream_time_ms=stream_time_ms)
    forget = forget_closed_panes(spec, stream_time_ms)
    return slices_applier(config, spec, batch_id, write_ts, pane_deltas_of, apply, timer, cache, forget)


def forget_closed_panes(spec: StoreSpec, stream_time_ms: int | None) -> Callable[[BucketCache], None]:
    """What a task does to each bucket file it opens: forget the rows whose `from` is before the
    first window open at `stream_time_ms`, which no batch writes again (one prefix of the file:
    keys start with `from`). The bound is packed here, on the driver: the function goes to the
    executors, and a struct.Struct does not pickle."""
    below = _LONG.pack(spec.windowing.first_open_start(stream_time_ms))

    def forget_closed(file: BucketCache) -> None:
        file.forget_below(below)

    return forget_closed
