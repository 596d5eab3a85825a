"""The pure decisions that fence operator actions by epoch (issue 45, item 7): what a re-layout
does with its new table once it failed (settled on a serial read of the registry), the swap and
the epoch check refused for a newer writer, and a livestate DataFrame that finds its store moved
to another table since load()."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile

from statestore.core.errors import StoreFencedError, StoreMismatchError
from statestore.core.model import StoreSpec, StoreType
from statestore.dataframe.source import moved_since_load
from statestore.store.book import registry
from statestore.store.relayout import DROP, KEEP, SWAPPED, settle_failed_relayout

SPEC = StoreSpec("ks", "words", StoreType.PARTITIONED_KV, 4)
NEW = "words_store_r1"


@pytest.mark.parametrize(
    ("swap_sent", "registered", "expected"),
    [
        (True, (NEW, 7), SWAPPED),  # a timed-out swap that applied: the re-layout is done
        (True, ("words_store", 7), DROP),  # it did not apply, and a serial read means it never will
        (False, ("words_store", 7), DROP),  # the copy failed: nobody else acted since our epoch
        (False, (NEW, 7), KEEP),  # the store uses it (not through us): never dropped
        (True, (NEW, 8), KEEP),
        (True, ("words_store", 8), KEEP),  # fenced: another action may be using that name now
        (False, ("words_store", None), KEEP),
        (True, None, KEEP),  # the serial read failed: outcome unknown, nothing dropped
    ],
)
def test_a_failed_relayout_drops_its_table_only_while_its_epoch_is_the_stores_and_the_store_does_not_use_it(
    swap_sent, registered, expected
):
    assert settle_failed_relayout(NEW, 7, swap_sent, registered) == expected


class _Session:
    """A session whose every statement answers `row` (an LWT's result or a serial read's row)."""

    def __init__(self, row):
        self.row = row
        self.cluster = SimpleNamespace(
            profile_manager=SimpleNamespace(profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile()})
        )
        self.cql: list[str] = []

    def prepare(self, cql):
        self.cql.append(cql)
        return SimpleNamespace(cql=cql, bind=lambda params: SimpleNamespace(cql=cql))

    def execute(self, statement, params=None, execution_profile=None):
        return SimpleNamespace(one=lambda: self.row)


def test_the_swap_is_conditional_on_the_relayouts_epoch_and_a_newer_one_is_fenced():
    session = _Session(SimpleNamespace(applied=False, table_name="words_store", epoch=8))
    with pytest.raises(StoreFencedError, match=r"epoch 7.*newer writer \(epoch 8\)"):
        registry.swap_table(session, SPEC, NEW, 4, 7)
    assert session.cql[-1].endswith("IF table_name = ? AND epoch = ?")
    session.row = SimpleNamespace(applied=False, table_name="words_store_r3", epoch=7)
    with pytest.raises(StoreMismatchError, match="no longer uses table words_store"):
        registry.swap_table(session, SPEC, NEW, 4, 7)


def test_the_epoch_check_before_a_truncate_refuses_a_newer_epoch():
    session = _Session(SimpleNamespace(table_name="words_store", epoch=8))
    with pytest.raises(StoreFencedError, match="truncating its table"):
        registry.check_epoch(session, SPEC, 7, "truncating its table")
    session.row = SimpleNamespace(table_name="words_store", epoch=7)
    registry.check_epoch(session, SPEC, 7, "truncating its table")


def test_a_dataframe_whose_store_moved_to_another_table_since_load_is_told_to_load_again():
    moved = replace(SPEC, table_name=NEW, subpartitions=4)
    assert moved_since_load(SPEC, SPEC) is None
    assert moved_since_load(SPEC, replace(SPEC, retention_ms=1000)) is None  # same table: read live
    problem = moved_since_load(SPEC, moved)
    assert "words_store to words_store_r1" in problem and "load() it again" in problem
