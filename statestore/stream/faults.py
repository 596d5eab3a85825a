"""A test-only fault-injection switch: crash the whole job in the middle of a batch's writes.

With STATESTORE_TEST_FAULT=kill-mid-write:<batch_id>, the executor applying that batch writes
the first half of its new values, then kills its process group (driver, executors and Python
workers: a hard crash of the whole job). Unset (always, outside tests), it costs one
environment lookup per slice of deltas.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

ENV = "STATESTORE_TEST_FAULT"


def crash_if_armed_mid_write(batch_id: int, write_first: Callable[[int], None], writes: int) -> None:
    """When the switch is armed for `batch_id` and the batch writes more than one row: write the
    first half (`write_first(half)`), then crash. Otherwise nothing (one environment lookup)."""
    if kill_armed_for(batch_id) and writes > 1:
        write_first(writes // 2)
        crash()


def kill_armed_for(batch_id: int) -> bool:
    kind, _, target = os.environ.get(ENV, "").partition(":")
    return kind == "kill-mid-write" and target == str(batch_id)


def crash() -> None:
    # PySpark's worker daemon runs in a process group of its own: kill the group of the
    # session leader (spark-submit's JVM and the Python driver) first, then our own.
    os.killpg(os.getsid(0), signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)
