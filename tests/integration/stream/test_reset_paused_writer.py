"""`statestore reset` against a paused writer: the job frozen (SIGSTOP) in the middle of a batch's
writes for longer than its lease, the store reset meanwhile, then the job woken (SIGCONT). The
reset took the lease and a newer epoch, so the zombie records nothing, and the entries it writes
after the truncate are shadowed: the store stays empty and a new stream counts exactly."""

from __future__ import annotations

import os
import signal

from statestore.store import admin
from statestore.store.book import registry
from statestore.store.book.lease import current_holder
from tests.corpus import generate
from tests.integration.conftest import dump, produce_lines, run_stream, wait_for
from tests.integration.stream.test_zombie_driver import _end_session, _launch, _session_members, _stopped

PAUSED_BATCH = 1
BATCH_LINES = 500  # under --driver-apply-records: the driver applies the batch and freezes itself


def test_a_reset_fences_a_paused_writer_and_its_late_writes_leave_no_count(
    spark, session, keyspace, cassandra_config, kafka_config, topic, store_name, tmp_path
):
    lines, truth = generate(4 * BATCH_LINES, seed=2828)
    produce_lines(kafka_config, topic, lines)
    checkpoint = tmp_path / "cp"
    zombie = _launch("zombie", topic, store_name, checkpoint, keyspace, f"pause-mid-write:{PAUSED_BATCH}", BATCH_LINES)
    try:
        wait_for(lambda: _stopped(zombie.pid), 300, "the driver to freeze mid-write")
        frozen = registry.progress(session, keyspace, store_name)
        assert frozen.pending_batch_id == PAUSED_BATCH and frozen.last_batch_id == PAUSED_BATCH - 1
        assert dump(session, keyspace, store_name)  # batch 0 and half of batch 1 are in
        # Its lease lapses (a paused driver renews nothing); the operator resets the store.
        wait_for(lambda: current_holder(session, keyspace, store_name) is None, 60, "the zombie's lease to lapse")
        admin.truncate_store(session, keyspace, store_name, verb="resetting")
        reset = registry.progress(session, keyspace, store_name)
        assert not reset.has_batches
        assert dump(session, keyspace, store_name) == {}

        # The zombie wakes up: it writes the rest of its batch, then its record is refused.
        for pid in _session_members(zombie.pid):
            os.kill(pid, signal.SIGCONT)
        zombie.wait(timeout=300)
        log = (checkpoint.parent / "zombie.log").read_text(errors="replace")
        assert f"fenced off while recording batch {PAUSED_BATCH}" in log, log[-3000:]
        assert zombie.returncode != 0
        after = registry.progress(session, keyspace, store_name)
        assert not after.has_batches and after.epoch == reset.epoch > frozen.epoch
        assert dump(session, keyspace, store_name) == {}  # its late writes left nothing behind

        # A new stream from a new checkpoint counts the topic exactly.
        run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp2")
        assert dump(session, keyspace, store_name) == dict(truth)
    finally:
        _end_session(zombie.pid)
