"""Progress of long scans: a tqdm bar on a terminal, periodic log lines otherwise (Airflow).

The work runs in Spark tasks, one per token range; the driver follows the job through
Spark's status tracker, so progress counts finished token ranges.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator

_log = logging.getLogger("statestore.maintenance")


class Progress:
    """Counts units of work; shows a bar when stderr is a terminal, else logs every `log_every_s`."""

    def __init__(self, total: int, what: str, unit: str = "ranges", log_every_s: float = 15.0, tty: bool | None = None):
        self.total = total
        self.what = what
        self.unit = unit
        self.done = 0
        self.log_every_s = log_every_s
        self.started = time.monotonic()
        self._last_log = self.started
        self._bar = None
        if sys.stderr.isatty() if tty is None else tty:
            from tqdm import tqdm  # only for a terminal: tqdm is a tool, not a library dependency

            self._bar = tqdm(total=total, desc=what, unit=unit, file=sys.stderr, leave=False)

    def advance_to(self, done: int) -> None:
        done = min(done, self.total)
        if done <= self.done:
            return
        if self._bar is not None:
            self._bar.update(done - self.done)
        self.done = done
        now = time.monotonic()
        if self._bar is None and now - self._last_log >= self.log_every_s:
            self._last_log = now
            _log.info("%s: %d/%d %s (%.0fs)", self.what, done, self.total, self.unit, now - self.started)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        _log.info("%s: %d/%d %s done in %.1fs", self.what, self.done, self.total, self.unit, self.elapsed)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


@contextlib.contextmanager
def spark_progress(spark, total: int, what: str, poll_s: float = 1.0) -> Iterator[Progress]:
    """Run the body's Spark actions under a job group and report their finished tasks."""
    sc = spark.sparkContext
    group = f"statestore-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, what)
    progress = Progress(total, what)
    stop = threading.Event()

    def finished_tasks() -> int:
        tracker = sc.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                done += stage.numCompletedTasks if stage else 0
        return done

    def follow() -> None:
        while not stop.wait(poll_s):
            with contextlib.suppress(Exception):  # the tracker is best effort; never fail the job
                progress.advance_to(finished_tasks())

    follower = threading.Thread(target=follow, name="maintenance-progress", daemon=True)
    follower.start()
    try:
        yield progress
        progress.advance_to(total)
    finally:
        stop.set()
        follower.join(timeout=5)
        sc.setLocalProperty("spark.jobGroup.id", None)
        progress.close()
