"""Reading query results page by page, with the next page requested while this one is used.

Scans over many store partitions start every partition's first page at once, so partitions
are read concurrently, and each partition's next page is already on its way while the caller
consumes the current one. Memory stays at about two pages per partition.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence

from cassandra import OperationTimedOut, ReadFailure, ReadTimeout
from cassandra.concurrent import execute_concurrent


def paged(session, statement, params: Sequence, page_size: int, profile) -> Iterator:
    """The rows of `statement`; its first page is requested now, before iteration starts."""
    bound = statement.bind(params)
    bound.fetch_size = page_size
    first = session.execute_async(bound, execution_profile=profile)

    def rows() -> Iterator:
        future = first
        while future is not None:
            result = future.result()
            page = result.current_rows
            state = result.paging_state
            future = session.execute_async(bound, paging_state=state, execution_profile=profile) if state else None
            yield from page

    return rows()


def merge_in_order(streams: Iterable[Iterator], key: Callable, reverse: bool = False) -> Iterator:
    """Merge streams that are each sorted by `key` (descending with `reverse`)."""
    return heapq.merge(*streams, key=key, reverse=reverse)


def count_per_partition(session, count_select, key_select, locations: Sequence[Sequence], profile) -> list[int]:
    """The exact rows of each Cassandra partition in `locations` (its partition key values), in
    order: one `count_select` (COUNT(*)) each, 8 at a time. A partition of millions of rows
    outlasts one request's timeout on a small node: it is counted page by page instead with
    `key_select` (each page its own request). Cassandra 5 reports a replica that aborted the read
    at its timeout as a ReadFailure, not a ReadTimeout; a real failure fails the paged count too."""
    results = execute_concurrent(
        session,
        execution_profile=profile,
        statements_and_parameters=[(count_select, location) for location in locations],
        concurrency=8,
        raise_on_first_error=False,
    )
    counts = []
    for location, result in zip(locations, results, strict=True):
        if result.success:
            counts.append(result.result_or_exc.one()[0])
        elif isinstance(result.result_or_exc, (ReadTimeout, ReadFailure, OperationTimedOut)):
            counts.append(sum(1 for _ in paged(session, key_select, location, 5000, profile)))
        else:
            raise result.result_or_exc
    return counts
