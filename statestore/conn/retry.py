"""Bounded retries while Cassandra is unreachable or overloaded.

Only for work that is safe to repeat: the replay-safe apply (absolute values tagged with their
batch) and registry reads. Backoff doubles from 0.5 s up to 8 s; after the budget the error
says what failed and that restarting the job later keeps the counts exact.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import TypeVar

from cassandra import InvalidRequest, OperationTimedOut, ReadTimeout, Unavailable, WriteTimeout
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionException

from statestore.conn.cassandra import cas_outcome_unknown, configured_level, hosts_down
from statestore.core.config import CassandraConfig
from statestore.core.errors import CassandraUnavailableError, StoreFencedError

T = TypeVar("T")
TRANSIENT = (NoHostAvailable, OperationTimedOut, Unavailable, ReadTimeout, WriteTimeout, ConnectionException)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: Cassandra unreachable, short of replicas, slow, or a lightweight
    transaction whose outcome it could not tell (every retried action is safe to repeat)."""
    return isinstance(exc, TRANSIENT) or cas_outcome_unknown(exc)


_TABLE_GONE = re.compile(r"unconfigured table|table \S+ does not exist", re.IGNORECASE)


def table_gone(exc: BaseException) -> bool:
    """Cassandra refused a statement because its table no longer exists: for a writer, the mark
    of a store moved to a new table generation under it (statestore.store.admin's reset)."""
    return isinstance(exc, InvalidRequest) and _TABLE_GONE.search(str(exc)) is not None


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
    # What Cassandra said it lacked, from any attempt: the last error may be a bare client timeout.
    shortfall = ""
    while True:
        try:
            return action()
        except Exception as exc:  # only what is_transient names is retried; anything else propagates
            if table_gone(exc):
                raise StoreFencedError(
                    f"{what} failed: its table is gone ({exc}). A reset or a re-layout moved the store to a "
                    "new table (or it was dropped) while this writer ran: this writer is fenced and wrote "
                    "nothing there. Start the job again to go on in the store's current table."
                ) from exc
            if not is_transient(exc):
                raise
            shortfall = _replicas_of(exc) or shortfall
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                where = ", ".join(f"{h}:{config.port}" for h in config.hosts)
                raise CassandraUnavailableError(
                    f"{what} failed for {config.retry_budget_s:.0f}s ({attempt} attempts) with Cassandra "
                    f"at {where} unreachable or overloaded; {_levels(config)}{_down(config)}{shortfall}last error: "
                    f"{type(exc).__name__}: {exc}. "
                    "Restart the job once Cassandra answers: the counts stay exact (a replayed "
                    "batch skips what it already wrote). Tune with --retry-budget / "
                    "--request-timeout."
                ) from None
            _log.warning("%s: %s, retrying in %.1fs (attempt %d)", what, type(exc).__name__, delay, attempt)
            sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_DELAY_S)
            attempt += 1


def _levels(config: CassandraConfig) -> str:
    return (
        f"entries need {configured_level('entries', config.dml_consistency)}, registry and lease "
        f"{configured_level('bookkeeping', config.bookkeeping_consistency)} "
        f"(serial {configured_level('serial', config.serial_consistency)}); "
    )


def _down(config: CassandraConfig) -> str:
    down = hosts_down(config)
    return f"nodes this process sees down: {', '.join(down) or 'none'}; " if down is not None else ""


def _replicas_of(exc: Exception) -> str:
    """What Cassandra said it lacked, when it said (too few replicas alive for the level)."""
    if isinstance(exc, Unavailable) and exc.consistency is not None:
        from cassandra import ConsistencyLevel

        level = ConsistencyLevel.value_to_name.get(exc.consistency, exc.consistency)
        return (
            f"consistency {level} needs {exc.required_replicas} replicas but only {exc.alive_replicas} "
            "are alive (bring the down nodes back, or lower the level with --dml-consistency / "
            "--bookkeeping-consistency knowing what it gives up); "
        )
    if isinstance(exc, (ReadTimeout, WriteTimeout)) and exc.consistency is not None:
        from cassandra import ConsistencyLevel

        level = ConsistencyLevel.value_to_name.get(exc.consistency, exc.consistency)
        return (
            f"consistency {level} needs {exc.required_responses} replicas but only "
            f"{exc.received_responses} answered in time; "
        )
    return ""
