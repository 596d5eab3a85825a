"""Prepared UNLOGGED batches: every row of every group lands in exactly one batch, in order,
with the write timestamp bound once per batch, and only power-of-two batch sizes are prepared."""

from __future__ import annotations

import pytest

from statestore.store.tables.unlogged import batch_cql, batch_work, bind_serialized, power_of_two_sizes

INSERT = "INSERT INTO ks.t (partition, key, value) VALUES (?, ?, ?)"


class _PreparingSession:
    """Stands in for the driver's session: `prepare` returns a fresh object per CQL text."""

    def __init__(self):
        self.prepared: list[str] = []

    def prepare(self, cql):
        self.prepared.append(cql)
        return type("Prepared", (), {"cql": cql, "is_idempotent": False})()


@pytest.mark.parametrize("rows", [1, 2, 3, 37, 63, 64, 65, 100])
def test_sizes_are_distinct_powers_of_two_summing_to_the_rows(rows):
    sizes = list(power_of_two_sizes(rows))
    assert sum(sizes) == rows
    assert sizes == sorted(set(sizes), reverse=True)
    assert all(size & (size - 1) == 0 for size in sizes)


def test_no_rows_make_no_batch():
    assert list(power_of_two_sizes(0)) == []


def test_a_batch_repeats_the_insert_and_binds_its_timestamp_first():
    cql = batch_cql(INSERT, 2, timestamped=True)
    assert cql == f"BEGIN UNLOGGED BATCH USING TIMESTAMP ? {INSERT}; {INSERT}; APPLY BATCH"
    assert "TIMESTAMP" not in batch_cql(INSERT, 4, timestamped=False)
    assert batch_cql(INSERT, 4, timestamped=False).count("INSERT INTO") == 4


def test_every_row_is_bound_once_in_order_with_the_timestamp():
    session = _PreparingSession()
    groups = [[(0, f"k{i}", i) for i in range(37)], [(1, "x", 9)], [(2, f"m{i}", i) for i in range(64)]]
    work = batch_work(session, INSERT, groups, write_ts=1_700)
    assert [s.cql.count("INSERT INTO") for s, _ in work] == [32, 4, 1, 1, 64]
    assert all(values[0] == 1_700 and len(values) == 1 + 3 * s.cql.count("INSERT INTO") for s, values in work)
    bound = [tuple(values[i : i + 3]) for _, values in work for i in range(1, len(values), 3)]
    assert bound == [row for group in groups for row in group]
    assert all(s.is_idempotent for s, _ in work)


def test_without_a_timestamp_nothing_extra_is_bound_and_statements_are_reused():
    session = _PreparingSession()
    work = batch_work(session, INSERT, [[(0, "a", 1)] * 5, [(1, "b", 2)] * 5], write_ts=None)
    assert [len(values) for _, values in work] == [12, 3, 12, 3]
    assert len(session.prepared) == 2  # one per size, prepared once per session


def _prepared(types: list, encryption=None):
    """A real driver PreparedStatement over columns of `types` (no server needed to bind)."""
    from cassandra.protocol import ColumnMetadata
    from cassandra.query import PreparedStatement

    columns = [ColumnMetadata("ks", "t", f"c{i}", cql_type) for i, cql_type in enumerate(types)]
    return PreparedStatement(columns, b"id", None, "INSERT", "ks", 5, None, None, encryption)


def test_serialized_values_are_the_bytes_the_driver_binds():
    from datetime import datetime

    from cassandra.cqltypes import BytesType, DateType, Int32Type, LongType
    from cassandra.query import UNSET_VALUE

    types = [LongType, Int32Type, BytesType, BytesType, DateType, LongType] * 5
    rows = [
        [1_700_000_000_000_000, 3, b"key", b"\x00" * 8, 1_700_000_000_123, 42],
        [0, -1, b"", bytearray(b"raw"), datetime(2026, 11, 26, 1, 2, 3), None],
        [-(2**63), 2**31 - 1, b"\xff", b"v", UNSET_VALUE, 2**63 - 1],
        [5, 0, memoryview(b"mv"), b"", -5, True],
        [None, None, None, None, None, UNSET_VALUE],
    ]
    values = [value for row in rows for value in row]
    statement = _prepared(types)
    ours = bind_serialized(statement, values)
    assert ours.values == statement.bind(values).values
    assert ours.prepared_statement is statement


def test_values_the_driver_refuses_are_refused_alike():
    from cassandra.cqltypes import Int32Type

    statement = _prepared([Int32Type])
    for bad in (2**31, "7"):
        with pytest.raises(TypeError) as driver_error:
            statement.bind([bad])
        with pytest.raises(type(driver_error.value)):
            bind_serialized(statement, [bad])


def test_the_driver_binds_under_column_encryption_or_a_short_list():
    from cassandra.cqltypes import Int32Type, LongType

    calls = []

    class Recording:
        def contains_column(self, _column):
            calls.append("asked")
            return False

    encrypted = _prepared([Int32Type, LongType], Recording())
    assert bind_serialized(encrypted, [1, 2]).values == encrypted.bind([1, 2]).values
    assert calls  # the driver's bind consulted the policy
    short = _prepared([Int32Type, LongType])
    assert bind_serialized(short, [1]).values == short.bind([1]).values  # the rest is UNSET


def _atoms_and_fillers():
    from hypothesis import strategies as st

    sizes = st.lists(st.integers(min_value=1, max_value=8), max_size=40)
    return st.tuples(sizes, st.integers(min_value=0, max_value=100))


def test_atomic_batches_cut_no_atom_and_send_powers_of_two():
    """Every group atomic_batches makes of atoms is a power of two long (write_unlogged sends
    it as one batch statement), holds whole atoms only, and is topped up with fillers or its
    own last row again; every row is written, and nothing else."""
    from hypothesis import given, settings

    from statestore.store.tables.unlogged import atomic_batches

    @settings(max_examples=300, deadline=None)
    @given(_atoms_and_fillers())
    def check(case):
        sizes, filler_count = case
        atoms = [[("atom", a, r) for r in range(size)] for a, size in enumerate(sizes)]
        fillers = [("filler", f, 0) for f in range(filler_count)]
        groups = list(atomic_batches(atoms, fillers, 8))
        written = [row for group in groups for row in group]
        assert set(written) == {row for atom in atoms for row in atom} | set(fillers)
        assert len(written) == len(set(written)) + sum(len(g) - len(set(g)) for g in groups)  # repeats: padding
        for i, group in enumerate(groups):
            assert len(group) <= 8
            held = {row[1] for row in group if row[0] == "atom"}
            assert all(sum(1 for row in group if row[:2] == ("atom", a)) >= sizes[a] for a in held)  # whole
            if held:
                assert len(group) & (len(group) - 1) == 0
            if len(set(group)) < len(group):  # padded: only once no filler was left
                assert group[-1] == group[len(set(group)) - 1]
                assert not any(row[0] == "filler" for later in groups[i + 1 :] for row in later)

    check()


def test_an_atom_longer_than_a_batch_is_refused():
    from statestore.store.tables.unlogged import atomic_batches

    with pytest.raises(ValueError, match="does not fit"):
        list(atomic_batches([[(1,)] * 9], [], 8))


def test_an_atom_is_padded_with_its_own_last_row_when_no_filler_is_left():
    from statestore.store.tables.unlogged import atomic_batches

    assert list(atomic_batches([[(1,), (2,), (3,)]], [], 8)) == [[(1,), (2,), (3,), (3,)]]
    assert list(atomic_batches([[(1,), (2,), (3,)]], [(9,), (8,)], 8)) == [[(1,), (2,), (3,), (8,)], [(9,)]]
