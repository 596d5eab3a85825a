"""Fencing across two data centers, on a real Cassandra cluster that has two (issue 28, item 8):
stack/two_dc.py's two nodes, dc1 on 127.0.0.1 and dc2 on 127.0.0.2, and a keyspace with one
replica in each. Each writer's driver is pinned to its own data center (local_dc: the default
load balancing sends nothing to a remote one), and the two claim the same store at once.

- At LOCAL_SERIAL each data center's Paxos round is decided by its own replica alone, so both
  claims of a lease, and both takes of an epoch, can win: two writers in one store. (This is
  what fencing was before the fix, and what an explicit LOCAL_SERIAL would still do.)
- By default (auto: SERIAL) the same race has exactly one winner every time, through the very
  code the stream runs (StoreLease.acquire and registry.take_epoch, retried as the job does).
- An explicit LOCAL_SERIAL is refused on this keyspace before anything is written; so is an
  explicit LOCAL_QUORUM for entries or bookkeeping.
- Entries: a writer in dc2 reads what a writer in dc1 wrote while dc2's replica missed the
  writes (its messages cut for 3 s): by default (auto: QUORUM) the writes wait for dc2 and it
  reads them; at LOCAL_QUORUM it read every key as before (needs root and iptables, as the
  other partition tests).

The cluster is started for this module if it is not up (about 20 s) and stopped again after
(about 13 s); the races themselves take about 7 s, the entries' failover about 5 s."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from functools import partial

import pytest

from statestore.conn.cassandra import DDL_PROFILE, WriterLevels, check_writer_scope, session_for
from statestore.conn.retry import with_retries
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError
from statestore.core.model import StoreSpec, StoreType
from statestore.store.book import registry
from statestore.store.book.lease import LeaseHeldError, StoreLease, current_holder
from statestore.store.book.lease import create_cql as lease_table_cql
from statestore.store.builder import StoreBuilder
from tests.integration.cluster import partitions
from tests.integration.conftest import PROJECT, wait_until

sys.path.insert(0, str(PROJECT / "stack"))
import two_dc as local_two_dc

RACES = 12  # stores claimed at once from both data centers by default: each must have one winner
MAX_RACES = 40  # at LOCAL_SERIAL: races until two writers both won one
_OPENED: list = []  # the driver clusters of this module's sessions, shut down with the cluster


@pytest.fixture(scope="module")
def two_dc():
    """The two-data-center cluster; started if it is not running, stopped again at the end."""
    running = local_two_dc.running()
    local_two_dc.up()
    yield local_two_dc
    # No session left reconnecting to the nodes for the rest of the run.
    for connection in _OPENED:
        connection.shutdown()
    if not running:
        local_two_dc.down()


@pytest.fixture(scope="module")
def dc_keyspace(two_dc):
    """A keyspace with one replica in each data center."""
    name = f"itdc_{uuid.uuid4().hex[:10]}"
    admin = _session(_config(name, "dc1", "AUTO"))
    admin.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}}",
        execution_profile=DDL_PROFILE,
    )
    registry.ensure_table(admin, name)
    admin.execute(lease_table_cql(name), execution_profile=DDL_PROFILE)
    yield name
    admin.execute(f"DROP KEYSPACE IF EXISTS {name}", execution_profile=DDL_PROFILE, timeout=120)


def _config(keyspace: str, local_dc: str, serial: str, **levels: str) -> CassandraConfig:
    """A writer's settings in `local_dc`: its requests are coordinated there only. `levels`:
    dml_consistency and bookkeeping_consistency, when not the defaults."""
    return cfg.resolve(
        CassandraConfig,
        env={},
        overrides={
            "hosts": tuple(local_two_dc.hosts().split(",")),
            "port": local_two_dc.CQL_PORT,
            "local_dc": local_dc,
            "keyspace": keyspace,
            "serial_consistency": serial,
            **levels,
        },
    )


def _session(config: CassandraConfig):
    """The project's session for `config` (session_for), its cluster kept to be shut down."""
    session = session_for(config)
    _OPENED.append(session.cluster)
    return session


def _writers(keyspace: str, serial: str) -> tuple[tuple[CassandraConfig, object], ...]:
    """(config, session) of a writer in dc1 and of one in dc2, at `serial`."""
    configs = (_config(keyspace, "dc1", serial), _config(keyspace, "dc2", serial))
    return tuple((config, _session(config)) for config in configs)


def _at_once(*actions) -> list:
    """Run the actions in threads released together; each one's result, or the error it raised."""
    results: list = [None] * len(actions)
    gate = threading.Barrier(len(actions))

    def run(i: int) -> None:
        gate.wait()
        try:
            results[i] = actions[i]()
        except Exception as exc:  # noqa: BLE001 - the caller asserts on what each action gave
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def _leases(keyspace: str, serial: str, store: str) -> list[StoreLease]:
    """A lease of `store` per data center, each with a checkpoint of its own (two jobs)."""
    return [
        StoreLease(session, keyspace, store, f"/checkpoints/{config.local_dc}", ttl_s=30)
        for config, session in _writers(keyspace, serial)
    ]


def _registered(keyspace: str, store: str) -> StoreSpec:
    spec = StoreSpec(keyspace, store, StoreType.PARTITIONED_KV, 4)
    return registry.register(_session(_config(keyspace, "dc1", "AUTO")), spec)


def _epoch_is(session, keyspace: str, store: str, epoch: int) -> bool:
    return registry.progress(session, keyspace, store).epoch == epoch


def _claims(lease: StoreLease) -> bool:
    """The lease's own insert (StoreLease._try_insert: what acquire runs once its scope check
    has passed), judged as acquire judges it: applied, or the row already ours (a retry)."""
    row = lease._try_insert()
    return bool(row.applied or row.holder == lease.holder)


def _retried(writers, leases: list[StoreLease], step) -> list:
    """Per data center, `step(lease)` retried as the job retries a lease (with_retries)."""
    return [
        partial(with_retries, config, "taking the lease", partial(step, lease))
        for (config, _), lease in zip(writers, leases, strict=True)
    ]


def test_at_local_serial_two_data_centers_can_both_take_one_store(dc_keyspace):
    both_leased, both_epoch = [], []
    sessions = [session for _, session in _writers(dc_keyspace, "LOCAL_SERIAL")]
    # One race in two or three has two winners here; raced until each kind had one.
    for i in range(MAX_RACES):
        if not both_leased:
            # At LOCAL_SERIAL the lease's scope check is what now refuses this keyspace: the
            # insert it guards is raced here without it.
            leases = _leases(dc_keyspace, "LOCAL_SERIAL", f"lease{i}")
            if _at_once(*(partial(_claims, lease) for lease in leases)) == [True, True]:
                both_leased.append(i)
        if not both_epoch:
            spec = _registered(dc_keyspace, f"epoch{i}")
            # A store's first epoch is random (registry.first_epoch): race the next one, which
            # both writers compute as the current one plus 1.
            first = registry.take_epoch(sessions[0], spec)
            seen_in_dc2 = partial(_epoch_is, sessions[1], dc_keyspace, spec.name, first)
            wait_until(seen_in_dc2, 10, "the first epoch replicated to dc2", every_s=0.1)
            taken = _at_once(*(partial(registry.take_epoch, session, spec) for session in sessions))
            if taken[0] == taken[1]:
                both_epoch.append((i, taken[0]))
        if both_leased and both_epoch:
            break
    # Both writers hold the lease, and both hold "the" newest epoch: neither is fenced.
    assert both_leased, f"no lease race of {MAX_RACES} had two winners at LOCAL_SERIAL"
    assert both_epoch, f"no epoch race of {MAX_RACES} gave both writers the same epoch at LOCAL_SERIAL"


def test_by_default_exactly_one_writer_of_two_data_centers_takes_the_store(dc_keyspace):
    writers = _writers(dc_keyspace, "AUTO")
    for i in range(RACES):
        # The race of the test above at the default serial consistency, retried as the job
        # retries (a Paxos round can end "outcome unknown" under contention).
        leases = _leases(dc_keyspace, "AUTO", f"raw{i}")
        claimed = _at_once(*_retried(writers, leases, _claims))
        assert sorted(claimed) == [False, True], claimed
        # The stream's own path: acquire, retried as the job retries it.
        leases = _leases(dc_keyspace, "AUTO", f"store{i}")
        acquired = _at_once(*_retried(writers, leases, StoreLease.acquire))
        winners = [lease for lease, result in zip(leases, acquired, strict=True) if result is None]
        refused = [result for result in acquired if result is not None]
        assert len(winners) == 1 and isinstance(refused[0], LeaseHeldError), acquired
        assert winners[0].holder in str(refused[0])
        assert current_holder(writers[1][1], dc_keyspace, f"store{i}").holder == winners[0].holder
        # Epochs: one each, never the same, so the older writer's progress updates are refused.
        spec = _registered(dc_keyspace, f"fenced{i}")
        taken = _at_once(
            *(partial(with_retries, c, "epoch", partial(registry.take_epoch, s, spec)) for c, s in writers)
        )
        assert all(isinstance(epoch, int) for epoch in taken) and taken[0] != taken[1], taken


def test_an_explicit_local_serial_is_refused_on_a_keyspace_in_two_data_centers(dc_keyspace):
    (_, session), _ = _writers(dc_keyspace, "LOCAL_SERIAL")
    lease = StoreLease(session, dc_keyspace, "refused", "/checkpoints/a", ttl_s=30)
    with pytest.raises(ConfigError, match=r"replicated to 2 data centers \(dc1, dc2\).*LOCAL_SERIAL"):
        lease.acquire()
    assert current_holder(_session(_config(dc_keyspace, "dc1", "AUTO")), dc_keyspace, "refused") is None


def _iptables(action: str, node: local_two_dc.Node) -> subprocess.CompletedProcess:
    """Add (-I) or delete (-D) the rule that drops every packet sent to `node`'s storage port."""
    rule = ("-o", "lo", "-p", "tcp", "-d", node.address, "--dport", str(local_two_dc.STORAGE_PORT))
    argv = ("iptables", "-w", action, "OUTPUT", *rule, "-m", "comment", "--comment", "statestore-two-dc-cut", "-j")
    return subprocess.run((*argv, "DROP"), capture_output=True, text=True, timeout=30, check=action == "-I")


@contextmanager
def _messages_cut_to(node: local_two_dc.Node, seconds: float):
    """Cassandra's messages to `node` (its peer's mutations, and their retries) dropped from
    now until `seconds` later, whatever the body is doing then (it may be waiting on them). The
    node runs on and gossips to its peer, so neither is seen down; what was sent meanwhile
    arrives when TCP retransmits it, past Cassandra's 2 s write timeout: expired, dropped,
    left to hints (written on the peer, replayed 10 s or more later)."""
    _iptables("-I", node)
    heal = threading.Timer(seconds, _iptables, ("-D", node))
    heal.start()
    try:
        yield
    finally:
        heal.join()
        while _iptables("-D", node).returncode == 0:  # no copy left behind
            pass


@pytest.mark.skipif(partitions.unavailable() is not None, reason=str(partitions.unavailable()))
def test_a_writer_in_dc2_reads_the_entries_a_writer_in_dc1_wrote(dc_keyspace):
    """The failover of issue 45, item 6: a writer in dc1 writes a store's entries while dc2's
    replica misses them (dc1's messages to it cut for longer than Cassandra's 2 s write timeout,
    so the mutations are dropped and left to hints), then a writer pinned to dc2 reads them at
    once, as a restarted stream's apply does before it writes old + delta. Both at the
    default levels, which a writer checks against the keyspace first. At LOCAL_QUORUM (the
    default before) dc1 alone acknowledged the writes and dc2 read every key as it was before
    (40 of 40, in each of three runs): the stale counts a failed-over stream would build on.
    At QUORUM the writes wait for dc2 (retried as the stream retries them) and dc2 reads them."""
    (config1, dc1), (_, dc2) = _writers(dc_keyspace, "AUTO")
    for session in (dc1, dc2):
        assert check_writer_scope(session, dc_keyspace) == WriterLevels("QUORUM", "QUORUM", "SERIAL")
    builder = StoreBuilder(dc1, "failover").with_keyspace(dc_keyspace)
    store = builder.partitioned_key_value_store(partitions=8).create()
    keys = [f"k{i}" for i in range(40)]
    store.put_all((key, 1) for key in keys)
    read_in_dc2 = StoreBuilder(dc2, "failover").with_keyspace(dc_keyspace).partitioned_key_value_store(partitions=8)
    # dc2's replica holds them too (a node may learn of a new table a moment after its peer).
    wait_until(lambda: all(read_in_dc2.get(key) == 1 for key in keys), 30, "dc2 to hold the first values")
    began = time.monotonic()
    with _messages_cut_to(local_two_dc.NODES[1], seconds=3):
        with_retries(config1, "writing from dc1", lambda: store.put_all((key, 2) for key in keys))
    seen = {key: read_in_dc2.get(key) for key in keys}
    stale = {key: value for key, value in seen.items() if value != 2}
    assert not stale, f"dc2 read {len(stale)} of {len(keys)} keys stale {time.monotonic() - began:.1f}s on: {stale}"


@pytest.mark.parametrize("levels", [{"dml_consistency": "LOCAL_QUORUM"}, {"bookkeeping_consistency": "LOCAL_QUORUM"}])
def test_an_explicit_local_quorum_is_refused_on_a_keyspace_in_two_data_centers(dc_keyspace, levels):
    session = _session(_config(dc_keyspace, "dc2", "AUTO", **levels))
    lease = StoreLease(session, dc_keyspace, "refused_local", "/checkpoints/a", ttl_s=30)
    with pytest.raises(ConfigError, match=r"replicated to 2 data centers \(dc1, dc2\).* is LOCAL_QUORUM: .*QUORUM"):
        lease.acquire()
    assert current_holder(_session(_config(dc_keyspace, "dc1", "AUTO")), dc_keyspace, "refused_local") is None
