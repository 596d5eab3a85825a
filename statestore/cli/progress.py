"""Progress bars for long command-line work (`produce` of a large file, `dump`): a tqdm bar on
stderr when it is a terminal, nothing when it is piped or in CI (statestore.present.progress,
which the maintenance scans use too)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from statestore.present.progress import Progress

T = TypeVar("T")


def tracked(
    items: Iterable[T], total: int, what: str, unit: str, size: Callable[[T], int] = lambda _: 1, tty=None
) -> Iterator[T]:
    """`items`, passed through while a bar counts `size` of each up to `total`."""
    progress = Progress(max(total, 1), what, unit, tty=tty)
    done = 0
    try:
        for item in items:
            done += size(item)
            progress.advance_to(done)
            yield item
    finally:
        progress.close()
