"""A second, small local Cassandra cluster that spans two data centers: one node in dc1 on
127.0.0.1 and one in dc2 on 127.0.0.2, on ports of its own (CQL 9242, storage 7200, JMX
7311-7312), beside the single node and the 3-node cluster (cluster.py).

Why a cluster of its own: a keyspace replicated to two data centers can only be made where
Cassandra knows both (it refuses an unknown data center's name), and the 3-node cluster must
stay in one data center for every other cluster test. Two nodes are the least that shows what
fencing across data centers needs (SERIAL, not LOCAL_SERIAL: tests/integration/cluster/
test_cluster_two_dc.py). Each node reads its data center from its own
cassandra-rackdc.properties (GossipingPropertyFileSnitch).

Both nodes are seeds, so they start side by side (neither bootstraps: auto_bootstrap is off in
the shared template) and find each other by gossip; `up` returns once each node lists the
other as a peer in its data center, so a two-data-center keyspace can be created at once.
State lives under .stack/cluster/two-dc/ (`scripts/stack reset` deletes it with the cluster's).
Only the tests start it (`up`, `down`); it imports nothing of stack/ but stack_common.py.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import stack_common as common
from stack_common import LOGS, STACK_CONF, STATE, StackError

HOME = STATE / "cluster" / "two-dc"
CQL_PORT = 9242
STORAGE_PORT = 7200
JMX_PORT_BASE = 7310  # node i: 7310 + i
HEAP = "512m"
PEERS_TIMEOUT_S = 90


@dataclass(frozen=True)
class Node:
    """One node: its data center is its own, dc<index>."""

    index: int

    @property
    def name(self) -> str:
        return f"two-dc-cassandra-{self.index}"

    @property
    def address(self) -> str:
        return f"127.0.0.{self.index}"

    @property
    def data_center(self) -> str:
        return f"dc{self.index}"


NODES = (Node(1), Node(2))


def hosts() -> str:
    return ",".join(node.address for node in NODES)


def _spawn(node: Node):
    run_dir = HOME / node.name
    conf = run_dir / "cassandra.yaml"
    data_dir = run_dir / "data"
    common.render(
        STACK_CONF / "cassandra.yaml",
        conf,
        cluster_name="statestore-two-dc",
        snitch="GossipingPropertyFileSnitch",
        token_allocation="",
        address=node.address,
        seeds=hosts(),
        storage_port=STORAGE_PORT,
        native_port=CQL_PORT,
        data_dir=data_dir,
        authenticator="AllowAllAuthenticator",
        authorizer="AllowAllAuthorizer",
        client_encryption_options="",
    )
    rackdc = run_dir / "cassandra-rackdc.properties"
    rackdc.write_text(f"dc={node.data_center}\nrack=r1\n")
    argv = common.cassandra_command(
        conf,
        data_dir,
        LOGS / node.name,
        JMX_PORT_BASE + node.index,
        heap=HEAP,
        gossip=["-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=3000"],
        extra=(f"-Dcassandra-rackdc.properties={rackdc.as_uri()}",),
    )
    return common.spawn(node.name, argv, LOGS / node.name / "stdout.log", cwd=run_dir)


def _peer_data_centers(node: Node) -> set[str]:
    """The data centers of the peers `node` knows (its own system.peers_v2)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    only = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.address]))
    cluster = Cluster([node.address], port=CQL_PORT, execution_profiles={EXEC_PROFILE_DEFAULT: only})
    try:
        rows = cluster.connect().execute("SELECT data_center FROM system.peers_v2")
        return {row.data_center for row in rows}
    finally:
        cluster.shutdown()


def up() -> None:
    """Start both nodes (a no-op for one that runs); return once each sees the other."""
    started = time.monotonic()
    spawned = {node: _spawn(node) for node in NODES if not common.running_pid(node.name)}
    for node in NODES:
        if node not in spawned:
            print(f"{node.name}: already running")
            continue
        log = LOGS / node.name / "stdout.log"
        probe = lambda n=node: common.probe_cassandra(CQL_PORT, host=n.address)  # noqa: E731
        common.wait_until_up(node.name, spawned[node], probe, common.CASSANDRA_START_TIMEOUT_S, log)
        print(f"{node.name}: up on {node.address}:{CQL_PORT} in {node.data_center} ({time.monotonic() - started:.1f}s)")
    deadline = time.monotonic() + PEERS_TIMEOUT_S
    for node in NODES:
        others = {n.data_center for n in NODES if n != node}
        while not others <= _peer_data_centers(node):
            if time.monotonic() > deadline:
                raise StackError(f"{node.name} did not see its peer in {sorted(others)} within {PEERS_TIMEOUT_S}s")
            time.sleep(1.0)
    print(f"two-dc: up in {time.monotonic() - started:.1f}s (CQL {hosts()} port {CQL_PORT})")


def running() -> list[str]:
    """The names of the nodes that run."""
    return [node.name for node in NODES if common.running_pid(node.name)]


def down() -> None:
    """Stop both nodes, side by side (each stop waits for Cassandra's own shutdown)."""
    with ThreadPoolExecutor(len(NODES)) as pool:
        stopped = list(pool.map(lambda node: common.stop_process(node.name), NODES))
    for node, was_running in zip(NODES, stopped, strict=True):
        print(f"{node.name}: {'stopped' if was_running else 'was not running'}")
