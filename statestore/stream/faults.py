"""A test-only fault-injection switch: crash or pause the whole job in the middle of a batch's writes.

With STATESTORE_TEST_FAULT=kill-mid-write:<batch_id>, the process applying that batch (a Python
worker of an executor, or the driver for a small batch) writes the first half of its new
values, then kills the job's process groups (driver, executors and Python workers: a hard
crash of the whole job). With pause-mid-write:<batch_id> it stops them instead
(SIGSTOP), as a driver frozen by a long GC pause or a suspended VM; a test resumes them with
SIGCONT once another writer has taken over (the zombie-driver test of fencing); a job pauses
once only (several tasks of the batch reach the switch). With pause-before-record:<batch_id>
the driver stops itself (its own session) after the batch's writes and before recording it:
on a cluster, where executors run elsewhere, that is a zombie driver. Unset (always, outside
tests), it costs one environment lookup per slice of deltas and one per batch.
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path

ENV = "STATESTORE_TEST_FAULT"
_SIGNALS = {"kill-mid-write": signal.SIGKILL, "pause-mid-write": signal.SIGSTOP}
_DRIVER_PAUSE = "pause-before-record"


def crash_if_armed_mid_write(batch_id: int, write_first: Callable[[int], None], writes: int) -> None:
    """When the switch is armed for `batch_id` and the batch writes more than one row: write the
    first half (`write_first(half)`), then crash or pause. Otherwise nothing (one environment lookup)."""
    kind = armed_for(batch_id)
    if kind is not None and writes > 1 and (kind != "pause-mid-write" or _first_pause()):
        write_first(writes // 2)
        _signal_job(_SIGNALS[kind])


def pause_driver_if_armed(batch_id: int) -> None:
    """In the driver, between a batch's writes and its registry record: stop the driver's own
    session (spark-submit's JVM and this Python) when the switch is armed for `batch_id`."""
    kind, _, target = os.environ.get(ENV, "").partition(":")
    if kind == _DRIVER_PAUSE and target == str(batch_id):
        os.killpg(os.getsid(0), signal.SIGSTOP)


def _first_pause() -> bool:
    """True for the first task of this job (its session) to reach the pause, False after."""
    marker = Path(tempfile.gettempdir()) / f"statestore-test-paused-{os.getsid(0)}"
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return False
    return True


def armed_for(batch_id: int) -> str | None:
    """The fault armed for `batch_id` (kill-mid-write or pause-mid-write), or None."""
    kind, _, target = os.environ.get(ENV, "").partition(":")
    return kind if kind in _SIGNALS and target == str(batch_id) else None


def _signal_job(signum: int) -> None:
    # PySpark's worker daemon runs in a process group of its own: signal the group of the
    # session leader (spark-submit's JVM and the Python driver) first, then our own. The
    # driver is in the leader's group: signalling it twice would stop it again after a
    # test's SIGCONT.
    os.killpg(os.getsid(0), signum)
    if os.getpgid(0) != os.getsid(0):
        os.killpg(os.getpgid(0), signum)
