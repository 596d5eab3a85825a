"""Reading query results page by page, with the next page requested while this one is used.

Scans over many store partitions start every partition's first page at once, so partitions
are read concurrently, and each partition's next page is already on its way while the caller
consumes the current one. Memory stays at about two pages per partition.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence


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
