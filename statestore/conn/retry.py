"""Bounded retries while Cassandra is unreachable or overloaded.

Only for work that is safe to repeat: the replay-safe apply (absolute values tagged with their
batch) and registry reads. Backoff doubles from 0.5 s up to 8 s; after the budget the error
says what failed and that restarting the job later keeps the counts exact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from cassandra import OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionException

from statestore.core.config import CassandraConfig
from statestore.core.errors import CassandraUnavailableError

T = TypeVar("T")
TRANSIENT = (NoHostAvailable, OperationTimedOut, Unavailable, ReadTimeout, WriteTimeout, ConnectionException)
_FIRST_DELAY_S = 0.5
_MAX_DELAY_S = 8.0
_log = logging.getLogger(__name__)


def with_retries(
    config: CassandraConfig, what: str, action: Callable[[], T], sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run `action`, retrying transient Cassandra errors for up to `config.retry_budget_s`."""
    deadline = time.monotonic() + config.retry_budget_s
    delay = _FIRST_DELAY_S
    attempt = 1
    while True:
        try:
            return action()
        except TRANSIENT as exc:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                where = ", ".join(f"{h}:{config.port}" for h in config.hosts)
                raise CassandraUnavailableError(
                    f"{what} failed for {config.retry_budget_s:.0f}s ({attempt} attempts) with Cassandra "
                    f"at {where} unreachable or overloaded; last error: {type(exc).__name__}: {exc}. "
                    "Restart the job once Cassandra answers: the counts stay exact (a replayed "
                    "batch skips what it already wrote). Tune with --retry-budget / "
                    "--request-timeout."
                ) from None
            _log.warning("%s: %s, retrying in %.1fs (attempt %d)", what, type(exc).__name__, delay, attempt)
            sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_DELAY_S)
            attempt += 1
