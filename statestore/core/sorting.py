"""Sorting more entries than should sit in memory: sorted runs spilled to disk, then merged."""

from __future__ import annotations

import heapq
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")


def _spill(run: list) -> IO[bytes]:
    spool = tempfile.TemporaryFile()
    for item in run:
        pickle.dump(item, spool, protocol=pickle.HIGHEST_PROTOCOL)
    spool.seek(0)
    return spool


def _read(spool: IO[bytes]) -> Iterator:
    with spool:
        while True:
            try:
                yield pickle.load(spool)
            except EOFError:
                return


def external_sort(
    items: Iterable[T], key: Callable[[T], object], chunk_size: int, reverse: bool = False
) -> Iterator[T]:
    """`items` in `key` order (descending with `reverse`), holding at most `chunk_size` items
    in memory at once (plus one read-ahead item per spilled run)."""
    spools: list[IO[bytes]] = []
    run: list[T] = []
    for item in items:
        run.append(item)
        if len(run) >= chunk_size:
            run.sort(key=key, reverse=reverse)
            spools.append(_spill(run))
            run = []
    run.sort(key=key, reverse=reverse)
    if not spools:
        yield from run
        return
    yield from heapq.merge(*(_read(s) for s in spools), iter(run), key=key, reverse=reverse)
