"""A reset's lease (issue 45, item 7): durable, so a reset paused between its last epoch check
and its TRUNCATE keeps every stream off the store until it has finished; kept when the reset
fails after it began deleting; taken over only by a reset run with writer_stopped; and the
refusal names the reset and that way out."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cassandra import OperationTimedOut

from statestore.core.errors import WriterMayBeLiveError
from statestore.core.model import StoreSpec, StoreType
from statestore.store import admin
from statestore.store.book import lease as lease_module
from statestore.store.book.lease import RESET_CHECKPOINT, Holder, LeaseHeldError, StoreLease, held_message

SPEC = StoreSpec("ks", "words", StoreType.GLOBAL_KV, 1)
RESET = "statestore reset (host:1:abcd)"


class _Session:
    """Answers every statement with `row`; keeps each statement's CQL and parameters."""

    def __init__(self, row):
        self.row = row
        self.sent: list[tuple[str, tuple]] = []

    def execute(self, statement, params=(), execution_profile=None):
        self.sent.append((getattr(statement, "cql", statement), tuple(params or ())))
        return SimpleNamespace(one=lambda: self.row)


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setattr(lease_module, "check_writer_scope", lambda session, keyspace: None)
    monkeypatch.setattr(lease_module, "prepare", lambda session, cql: SimpleNamespace(cql=cql))
    return _Session(SimpleNamespace(applied=True))


def test_a_reset_holds_its_lease_without_a_ttl_and_a_stream_with_one(session):
    StoreLease(session, "ks", "words", RESET_CHECKPOINT, 30, RESET, durable=True).acquire(0)
    StoreLease(session, "ks", "words", "/checkpoints/a", 30).acquire(0)
    (reset_cql, reset_params), (_, stream_params) = [sent for sent in session.sent if "INSERT" in sent[0]]
    assert reset_cql.endswith("USING TTL ?") and reset_params[-1] == 0  # TTL 0: the row never expires
    assert stream_params[-1] == 30


def test_a_stream_is_refused_a_resets_lease_with_the_way_out(session):
    session.row = SimpleNamespace(applied=False, holder=RESET, checkpoint=RESET_CHECKPOINT, acquired_at=None)
    with pytest.raises(LeaseHeldError) as refused:
        StoreLease(session, "ks", "words", "/checkpoints/a", 30).acquire(0)
    message = str(refused.value)
    assert f"unfinished reset, {RESET}" in message and "run the reset again with --writer-stopped" in message
    assert "writer_stopped" in held_message("words", RESET, RESET_CHECKPOINT, None)
    assert "--writer-stopped" not in held_message("words", "host:2:ef", "/checkpoints/b", None)


def test_a_take_over_is_conditional_on_the_holder_seen(session):
    lease = StoreLease(session, "ks", "words", RESET_CHECKPOINT, 30, "statestore reset (host:2:ef)", durable=True)
    lease.take_over(RESET)
    cql, params = session.sent[-1]
    assert cql.endswith("IF holder = ?") and params[-1] == RESET and params[0] == 0
    session.row = SimpleNamespace(applied=False, holder="host:3:stream", checkpoint="/checkpoints/c")
    with pytest.raises(LeaseHeldError, match="being written by host:3:stream"):
        lease.take_over(RESET)


class _Lease:
    """StoreLease's part a reset uses, recording what happened to it."""

    def __init__(self, *args, **kwargs):
        self.holder, self.kwargs, self.events = kwargs["holder"], kwargs, []
        _Lease.made.append(self)

    def take_over(self, seen):
        self.events.append(f"take_over {seen}")

    def acquire(self, same_checkpoint_wait_s=None):
        self.events.append("acquire")

    def start_renewing(self):
        pass

    def check(self):
        pass

    def stop_renewing(self):
        self.events.append("kept")

    def release(self):
        self.events.append("released")


@pytest.fixture
def reset(monkeypatch):
    """truncate_store over fakes: a global store with batch 3 begun and never recorded; returns
    a function that runs it and tells what happened to its lease."""
    progress = SimpleNamespace(unfinished_batch=3, last_ts=5, pending_ts=6, offsets=None, pending_offsets=None)
    state = {"holder": None}
    monkeypatch.setattr(admin, "StoreLease", _Lease)
    _Lease.made = []
    monkeypatch.setattr(admin.registry, "lookup", lambda *a: SPEC)
    monkeypatch.setattr(admin.registry, "ensure_table", lambda *a: ())
    monkeypatch.setattr(admin.registry, "take_epoch", lambda *a: 8)
    monkeypatch.setattr(admin.registry, "progress", lambda *a: progress)
    monkeypatch.setattr(admin.registry, "clear_progress", lambda *a: None)
    monkeypatch.setattr(admin, "current_holder", lambda *a: state["holder"])
    monkeypatch.setattr(admin, "_table_metadata", lambda *a: object())
    monkeypatch.setattr(admin, "table_exists", lambda *a: False)

    def run(holder=None, writer_stopped=False, truncate=lambda *a: None, next_table=lambda *a: "words_store_r1"):
        state["holder"] = holder
        monkeypatch.setattr(admin, "_truncate", truncate)
        monkeypatch.setattr(admin, "_next_free_table", next_table)
        monkeypatch.setattr(admin, "_move_to_new_table", lambda session, spec, table, epoch: spec)
        admin.truncate_store(None, "ks", "words", writer_stopped=writer_stopped)
        return _Lease.made[-1]

    return run


def test_a_resets_lease_is_durable_and_released_once_it_finished(reset):
    lease = reset()
    assert lease.kwargs["durable"] is True and lease.events == ["acquire", "released"]
    assert reset(writer_stopped=True).events == ["acquire", "released"]  # truncated in place


def test_a_reset_that_fails_after_it_began_deleting_keeps_its_lease(reset):
    def timed_out(*args):
        raise OperationTimedOut("TRUNCATE")

    with pytest.raises(OperationTimedOut):
        reset(writer_stopped=True, truncate=timed_out)
    assert _Lease.made[-1].events == ["acquire", "kept"]


def test_a_reset_refused_before_deleting_anything_releases_its_lease(reset):
    def no_name(session, spec, refusal):
        raise WriterMayBeLiveError(refusal)

    with pytest.raises(WriterMayBeLiveError, match="Nothing was deleted"):
        reset(next_table=no_name)
    assert _Lease.made[-1].events == ["acquire", "released"]


def test_an_unfinished_resets_lease_is_taken_over_only_with_writer_stopped(reset):
    unfinished = Holder(RESET, RESET_CHECKPOINT, None)
    with pytest.raises(LeaseHeldError, match=r"truncating store 'words' refused: .*unfinished reset.*--writer-stopped"):
        reset(holder=unfinished)
    assert _Lease.made[-1].events == []  # nothing taken, nothing deleted
    assert reset(holder=unfinished, writer_stopped=True).events == [f"take_over {RESET}", "released"]
    stream = Holder("host:3:stream", "/checkpoints/c", None)
    with pytest.raises(LeaseHeldError, match="being written by host:3:stream"):
        reset(holder=stream, writer_stopped=True)  # a stream's lease expires by itself: never taken over
