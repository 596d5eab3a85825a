"""Operator actions fenced by epoch on the real Cassandra (issue 45, item 7): a `reset` or a
`relayout` that holds the store's lease, passes its last lease check and then pauses (a GC pause,
a suspended VM) while its lease lapses and a stream takes the store over, is refused when it wakes
up (StoreFencedError, CLI exit 4) and changes nothing: the stream's entries and progress stay
exact. A relayout's swap whose lightweight transaction timed out is settled by a serial read: an
applied swap is the re-layout done, one that did not apply drops the new table."""

from __future__ import annotations

import pytest
from cassandra import WriteTimeout

from statestore.cli.main import main as cli
from statestore.core.model import StoreSpec, StoreType
from statestore.store import relayout as relayout_module
from statestore.store.book import lease as lease_module
from statestore.store.book import registry
from statestore.store.book.lease import LEASE_TABLE, LeaseHeldError, StoreLease
from statestore.store.book.registry import BatchPosition, KafkaOffsets
from statestore.store.builder import open_store
from statestore.store.provision import provision_store, table_exists
from statestore.store.relayout import relayout_store
from statestore.stream.position import write_ts_for
from tests.integration.conftest import dump


class _Stream:
    """A stream writer as the job is one: the store's lease, then its next epoch, then batches
    begun, written and recorded under that epoch."""

    def __init__(self, session, spec: StoreSpec) -> None:
        self.session, self.spec = session, spec
        self.lease = StoreLease(session, spec.keyspace, spec.name, "checkpoint-of-the-stream", 30)
        self.lease.acquire(same_checkpoint_wait_s=0)
        self.epoch = registry.take_epoch(session, spec)

    def batch(self, batch_id: int, words: dict[str, int]) -> None:
        spec = registry.lookup(self.session, self.spec.keyspace, self.spec.name)  # the table of now
        ts = write_ts_for(registry.progress(self.session, spec.keyspace, spec.name), batch_id)
        offsets = KafkaOffsets.of({"t": {"0": batch_id + 1}})
        position = BatchPosition(batch_id=batch_id, write_ts=ts, start=None, end=offsets, query_id="q")
        registry.begin_batch(self.session, spec, position, self.epoch)
        store = open_store(self.session, spec.keyspace, spec.name)
        store.put_all([(word, (store.get(word) or 0) + n) for word, n in words.items()])
        registry.record_batch(self.session, spec, position, None, self.epoch)


def _take_over_after_check(monkeypatch, session, spec: StoreSpec, holder_prefix: str, armed=lambda: True):
    """Pause the operator action whose lease holder starts with `holder_prefix` right after a
    lease check passes (once `armed()`): its lease lapses and a stream takes the store, writes
    batch 1 (`late` +5) and keeps running. Returns the stream, once it has run."""
    real_check, taken = StoreLease.check, []

    def check_then_pause(self):
        real_check(self)
        if self.holder.startswith(holder_prefix) and armed() and not taken:
            # The pause outlasts the lease TTL: the row expires (deleted here, as the TTL would).
            delete = f"DELETE FROM {spec.keyspace}.{LEASE_TABLE} WHERE store = %s"
            session.execute(delete, (spec.name,))
            stream = _Stream(session, spec)
            stream.batch(1, {"late": 5, "a": 1})
            taken.append(stream)

    monkeypatch.setattr(lease_module.StoreLease, "check", check_then_pause)
    return taken


def _store_with_batch0(session, keyspace: str, name: str, store_type=StoreType.PARTITIONED_KV, pending=False):
    """A store whose batch 0 is recorded (`a` 1, `b` 2) and, if `pending`, batch 1 begun and
    never recorded (its writer gone), so a reset of a global store moves it to a new table."""
    spec = provision_store(session, StoreSpec(keyspace, name, store_type, 2 if store_type.partitioned else 1))
    first = _Stream(session, spec)
    first.batch(0, {"a": 1, "b": 2})
    if pending:
        ts = write_ts_for(registry.progress(session, keyspace, name), 1)
        position = BatchPosition(batch_id=1, write_ts=ts, start=None, end=None, query_id="q")
        registry.begin_batch(session, spec, position, first.epoch)
    first.lease.release()
    return spec


@pytest.mark.parametrize(
    ("store_type", "pending"),
    [(StoreType.PARTITIONED_KV, False), (StoreType.GLOBAL_KV, True)],
    ids=["truncated-in-place", "moved-to-a-new-table"],
)
def test_a_reset_paused_after_its_lease_check_is_refused_and_deletes_nothing(
    session, keyspace, store_name, monkeypatch, capsys, store_type, pending
):
    spec = _store_with_batch0(session, keyspace, store_name, store_type, pending)
    taken = _take_over_after_check(monkeypatch, session, spec, "statestore reset")
    try:
        assert cli(["--keyspace", keyspace, "reset", store_name, "--yes"]) == 4  # refused
        assert "fenced off" in capsys.readouterr().err
        assert taken, "the stream never took the store over"
        assert registry.lookup(session, keyspace, store_name).table == spec.table
        # A move fenced after creating its new table leaves it behind, empty.
        assert table_exists(session, keyspace, f"{store_name}_store_r1") == pending
        assert dump(session, keyspace, store_name) == {"a": 2, "b": 2, "late": 5}
        progress = registry.progress(session, keyspace, store_name)
        assert (progress.last_batch_id, progress.epoch) == (1, taken[0].epoch)
        taken[0].batch(2, {"b": 1})  # the stream carries on, its records accepted
        assert dump(session, keyspace, store_name) == {"a": 2, "b": 3, "late": 5}
    finally:
        for stream in taken:
            stream.lease.release()


def test_a_relayout_paused_before_its_swap_is_refused_and_the_store_keeps_its_table(
    session, keyspace, store_name, monkeypatch, capsys
):
    spec = _store_with_batch0(session, keyspace, store_name)
    copied = []
    real_copy = relayout_module._copy_and_verify

    def copy(*args):
        done = real_copy(*args)
        copied.append(done)  # the pause comes at the lease check after the copy, before the swap
        return done

    monkeypatch.setattr(relayout_module, "_copy_and_verify", copy)
    taken = _take_over_after_check(monkeypatch, session, spec, "statestore relayout", armed=lambda: bool(copied))
    try:
        assert cli(["--keyspace", keyspace, "relayout", store_name, "--subpartitions", "4"]) == 4  # refused
        err = capsys.readouterr().err
        assert "fenced off" in err and f"{store_name}_store_r1" in err  # the copy left behind is named
        assert taken, "the stream never took the store over"
        now = registry.lookup(session, keyspace, store_name)
        assert (now.table, now.subpartitions) == (spec.table, 1)
        assert dump(session, keyspace, store_name) == {"a": 2, "b": 2, "late": 5}
        taken[0].batch(2, {"b": 1})
        assert dump(session, keyspace, store_name) == {"a": 2, "b": 3, "late": 5}
    finally:
        for stream in taken:
            stream.lease.release()


def _timed_out_swap(monkeypatch, applied: bool) -> None:
    """The swap's lightweight transaction times out; whether it was applied is unknown to the
    relayout (`applied`: it was, and a serial read shows it)."""
    real_swap = registry.swap_table

    def swap(*args, **kwargs):
        if applied:
            real_swap(*args, **kwargs)
        raise WriteTimeout("Operation timed out (CAS)", write_type=5)

    monkeypatch.setattr(registry, "swap_table", swap)


def test_a_relayout_whose_swap_timed_out_is_settled_by_a_serial_read(session, keyspace, store_name, monkeypatch):
    _store_with_batch0(session, keyspace, store_name)
    _timed_out_swap(monkeypatch, applied=True)
    result = relayout_store(session, keyspace, store_name, 4)  # applied: the re-layout is done
    assert (result.new_table, result.entries) == (f"{store_name}_store_r1", 2)
    assert registry.lookup(session, keyspace, store_name).table == result.new_table
    assert table_exists(session, keyspace, result.new_table)
    assert dump(session, keyspace, store_name) == {"a": 1, "b": 2}

    _timed_out_swap(monkeypatch, applied=False)
    with pytest.raises(WriteTimeout):
        relayout_store(session, keyspace, store_name, 2)
    assert registry.lookup(session, keyspace, store_name).table == result.new_table
    assert not table_exists(session, keyspace, f"{store_name}_store_r2")  # not applied: dropped
    assert dump(session, keyspace, store_name) == {"a": 1, "b": 2}


def _pause_before_truncate(monkeypatch, session, spec: StoreSpec, while_paused) -> None:
    """Pause the reset right after its last epoch check, before its TRUNCATE of the store's
    table (the one window no lightweight transaction can close), and run `while_paused()`
    meanwhile. A pause outlasts any lease TTL: a lease row that carries one is deleted, as its
    expiry would delete it; a row without one stays."""
    real_check, paused = registry.check_epoch, []

    def check_then_pause(session_, spec_, epoch, what):
        real_check(session_, spec_, epoch, what)
        if what.endswith(f".{spec.table}") and not paused:
            paused.append(what)
            ttl = session.execute(
                f"SELECT TTL(holder) AS ttl FROM {spec.keyspace}.{LEASE_TABLE} WHERE store = %s", (spec.name,)
            ).one()
            if ttl is not None and ttl.ttl is not None:
                session.execute(f"DELETE FROM {spec.keyspace}.{LEASE_TABLE} WHERE store = %s", (spec.name,))
            while_paused()

    monkeypatch.setattr(registry, "check_epoch", check_then_pause)


def test_a_reset_paused_before_its_truncate_keeps_the_store_from_every_stream_until_it_is_done(
    session, keyspace, store_name, monkeypatch, capsys
):
    spec = _store_with_batch0(session, keyspace, store_name)
    refused, taken = [], []

    def a_stream_starts():
        try:
            stream = _Stream(session, spec)
        except LeaseHeldError as exc:
            refused.append(str(exc))
            return
        taken.append(stream)
        stream.batch(1, {"late": 5})  # recorded; the woken reset's TRUNCATE must not delete it

    _pause_before_truncate(monkeypatch, session, spec, a_stream_starts)
    try:
        code = cli(["--keyspace", keyspace, "reset", store_name, "--yes"])
        assert not taken, (
            "a stream took the store while a reset that still truncates it was paused: its recorded batch 1 "
            f"now counts {dump(session, keyspace, store_name)}"
        )
        assert code == 0
        assert "statestore reset (" in refused[0] and "--writer-stopped" in refused[0]
        assert dump(session, keyspace, store_name) == {}
        assert registry.progress(session, keyspace, store_name).last_batch_id is None
        stream = _Stream(session, spec)  # the reset done, its lease released: a stream starts
        taken.append(stream)
        stream.batch(0, {"b": 1})
        assert dump(session, keyspace, store_name) == {"b": 1}
    finally:
        for stream in taken:
            stream.lease.release()


def test_a_reset_killed_before_its_truncate_refuses_streams_until_a_reset_with_writer_stopped(
    session, keyspace, store_name, monkeypatch, capsys
):
    spec = _store_with_batch0(session, keyspace, store_name)

    class Killed(BaseException):
        """The reset's process killed (SIGKILL): nothing of it runs any more, its lease not released."""

    def killed():
        raise Killed

    _pause_before_truncate(monkeypatch, session, spec, killed)
    real_release = StoreLease.release
    monkeypatch.setattr(StoreLease, "release", lambda self: None)
    with pytest.raises(Killed):
        cli(["--keyspace", keyspace, "reset", store_name, "--yes"])
    monkeypatch.setattr(StoreLease, "release", real_release)
    monkeypatch.setattr(registry, "check_epoch", _REAL_CHECK_EPOCH)
    capsys.readouterr()

    with pytest.raises(LeaseHeldError, match=r"statestore reset \(.*--writer-stopped"):
        _Stream(session, spec)
    assert cli(["--keyspace", keyspace, "reset", store_name, "--yes"]) == 4  # refused: that reset may be running
    assert "--writer-stopped" in capsys.readouterr().err
    assert dump(session, keyspace, store_name) == {"a": 1, "b": 2}
    assert cli(["--keyspace", keyspace, "reset", store_name, "--yes", "--writer-stopped"]) == 0
    assert dump(session, keyspace, store_name) == {}
    stream = _Stream(session, spec)
    try:
        stream.batch(0, {"b": 1})
        assert dump(session, keyspace, store_name) == {"b": 1}
    finally:
        stream.lease.release()


_REAL_CHECK_EPOCH = registry.check_epoch
