"""Network partitions on the local cluster, with iptables (`make netfilter` installs it) and a
network namespace; the test process must run as root.

A Cassandra node cut off (`node_cut`): the node listens on its own loopback address
(127.0.0.2 for cassandra-2), so DROP rules on `lo` for that address and its ports (CQL 9142,
storage 7100), both ways, cut off what reaches it. What it sends on connections of its own to
its peers leaves from 127.0.0.1 (Cassandra does not bind them to its address): those are cut
by their four-tuples, read from /proc when the cut starts, and any it makes during the cut by
iptables' cgroup match (the process is moved into a cgroup v2 of ours for the cut). The Kafka
broker and Spark worker on the same address go on. Packets are dropped, not refused:
connections hang until their timeouts, as across a real partition.

A driver cut off (`DriverNamespace`): the driver runs in a network namespace of its own (its
own "machine", 10.213.7.2, reached over a veth pair), so its own loopback (PySpark's py4j
between its Python and its JVM) stays up when the link goes. Inside the namespace, connections
to the cluster's 127.0.0.1-3 addresses are NATed across the link to the host, which NATs them
back to the loopback address they named (so Cassandra's peers and Kafka's advertised listeners,
127.0.0.x, keep working); executors connect to the driver at 10.213.7.2. `cut()` drops
everything on the host's end of the link, both ways; `heal()` removes that rule.

Every rule lives in chains of our own (STATESTORE-NETCUT-*), so `clear()` removes all of them,
the namespace and the cgroups at once: at set-up (a crashed run's leftovers) and at tear-down.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from tests.integration.cluster.conftest import submit_to_cluster
from tests.integration.conftest import PROJECT

sys.path.insert(0, str(PROJECT / "stack"))
import cluster as local_cluster

CHAIN_OUT = "STATESTORE-NETCUT-OUT"  # filter, jumped to from OUTPUT (loopback packets all pass there)
CHAIN_IN = "STATESTORE-NETCUT-IN"  # filter, jumped to from INPUT (what comes in over the driver's link)
CHAIN_NAT = "STATESTORE-NETCUT-NAT"  # nat, jumped to from PREROUTING
NETNS = "statestore-netcut"
HOST_IF, NS_IF = "ssnetcut-h", "ssnetcut-n"
HOST_IP, NS_IP = "10.213.7.1", "10.213.7.2"
MAPPED = "10.213.8.{}"  # the host's stand-in, seen from the namespace, for 127.0.0.{}
# The driver's peers on 127.0.0.1 (nothing of its own listens there but its own, local, py4j):
# Cassandra, Kafka and the Spark master. Everything on 127.0.0.2-3 is the cluster's.
SERVICE_PORTS = (local_cluster.CQL_PORT, local_cluster.KAFKA_PORT, local_cluster.SPARK_MASTER_PORT)
# The cgroup (v2) hierarchy, for iptables' cgroup match on what a process sends.
CGROUP_ROOT = (
    Path("/sys/fs/cgroup/unified") if Path("/sys/fs/cgroup/unified/cgroup.procs").exists() else Path("/sys/fs/cgroup")
)
NETCUT_CGROUP = "statestore-netcut"


def unavailable() -> str | None:
    """Why partitions cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network partitions need root (iptables, ip netns)"
    if shutil.which("iptables") is None:
        return "iptables is missing: `make netfilter` installs it"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done


def _ipt(*args: str, table: str = "filter", check: bool = True) -> subprocess.CompletedProcess:
    return _run("iptables", "-w", "-t", table, *args, check=check)


_HOOKS = ((CHAIN_OUT, "OUTPUT", "filter"), (CHAIN_IN, "INPUT", "filter"), (CHAIN_NAT, "PREROUTING", "nat"))


def clear() -> None:
    """Remove every rule, chain and namespace of ours (idempotent; nothing else is touched)."""
    for chain, hook, table in _HOOKS:
        while _ipt("-D", hook, "-j", chain, table=table, check=False).returncode == 0:
            pass
        _ipt("-F", chain, table=table, check=False)
        _ipt("-X", chain, table=table, check=False)
    _release_cgroups()
    # Deleting the namespace deletes the veth pair (and the host end's sysctl) with it.
    _run("ip", "netns", "delete", NETNS, check=False)
    _run("ip", "link", "delete", HOST_IF, check=False)


def install() -> None:
    """Our (empty) chains, hooked in first."""
    clear()
    for chain, hook, table in _HOOKS:
        _ipt("-N", chain, table=table)
        _ipt("-I", hook, "1", "-j", chain, table=table)


def _node_rules(address: str) -> list[tuple[str, ...]]:
    """What reaches the node's address: clients and peers to its ports, and its answers."""
    ports = f"{local_cluster.CQL_PORT},{local_cluster.STORAGE_PORT}"
    tcp = ("-o", "lo", "-p", "tcp")
    return [
        (*tcp, "-d", address, "-m", "multiport", "--dports", ports),
        (*tcp, "-s", address, "-m", "multiport", "--sports", ports),
    ]


def _socket_inodes(pid: int) -> set[int]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def _ipv4(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s address (hex, host byte order words) as dotted IPv4 (v4-mapped too)."""
    word = hex_address[-8:]
    return ".".join(str(int(word[i : i + 2], 16)) for i in (6, 4, 2, 0))


def outbound_storage_connections(pid: int) -> list[tuple[str, int, str, int]]:
    """(local address, port, peer address, port) of the process' connections to a storage
    port: a node's own connections to its peers. Cassandra does not bind them to its address
    (they leave from 127.0.0.1), so they are cut one by one, by their four-tuple."""
    inodes = _socket_inodes(pid)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], int(fields[9])
            if inode not in inodes:
                continue
            (local_ip, local_port), (remote_ip, remote_port) = (a.rsplit(":", 1) for a in (local, remote))
            if int(remote_port, 16) == local_cluster.STORAGE_PORT:
                found.append((_ipv4(local_ip), int(local_port, 16), _ipv4(remote_ip), int(remote_port, 16)))
    return found


def _cgroup(name: str) -> Path:
    return CGROUP_ROOT / f"{NETCUT_CGROUP}-{name}"


def _move_to(cgroup: Path, pids) -> None:
    for pid in pids:
        try:
            (cgroup / "cgroup.procs").write_text(str(pid))
        except (ProcessLookupError, OSError):
            continue


def _release_cgroups() -> None:
    for group in CGROUP_ROOT.glob(f"{NETCUT_CGROUP}-*"):
        _move_to(CGROUP_ROOT, (group / "cgroup.procs").read_text().split())
        group.rmdir()


@contextmanager
def node_cut(name: str):
    """The Cassandra node `name` (e.g. cassandra-2) cut off from its peers and every client
    while inside, both ways: what reaches its address and ports is dropped, and so is what it
    sends from sockets of its own (its existing connections to its peers by their four-tuple;
    new ones by the cgroup (v2) the process is moved to for the cut)."""
    address = local_cluster.member(name).address
    pid = local_cluster.common.running_pid(name)
    assert pid is not None, f"{name} is not running"
    group = _cgroup(name)
    rules = [
        ("-o", "lo", "-m", "cgroup", "--path", f"{NETCUT_CGROUP}-{name}"),
        *_node_rules(address),
    ]
    try:
        group.mkdir(exist_ok=True)
        _ipt("-A", CHAIN_OUT, *rules[0], "-j", "DROP")
        _move_to(group, [pid])
        # Sockets made from now on are the cgroup's; those made before are listed now.
        for local, lport, peer, pport in outbound_storage_connections(pid):
            rules.append(
                ("-o", "lo", "-p", "tcp", "-s", local, "--sport", str(lport), "-d", peer, "--dport", str(pport))
            )
            rules.append(
                ("-o", "lo", "-p", "tcp", "-s", peer, "--sport", str(pport), "-d", local, "--dport", str(lport))
            )
        for rule in rules[1:]:
            _ipt("-A", CHAIN_OUT, *rule, "-j", "DROP")
        yield
    finally:
        for rule in rules:
            _ipt("-D", CHAIN_OUT, *rule, "-j", "DROP", check=False)
        _move_to(CGROUP_ROOT, [pid])
        if group.exists():
            group.rmdir()


class MessageCut:
    """Cassandra's internode messages to the node at `address` that carry `marker` (e.g. a
    partition key's bytes) dropped from `start()` to `heal()`, except those that also carry
    `sparing`: iptables' string match on each packet to the storage port. The first packet
    dropped stalls its TCP connection (the one for small messages: mutations, reads, batch log
    stores), so what follows on it waits too until the rule goes and TCP retransmits; gossip has
    a connection of its own, so the node is never seen down: requests to it time out instead."""

    def __init__(self, address: str, marker: bytes, sparing: bytes) -> None:
        to_node = ("-o", "lo", "-p", "tcp", "-d", address, "--dport", str(local_cluster.STORAGE_PORT))
        self._rules = [
            (*to_node, "-m", "string", "--algo", "bm", "--hex-string", f"|{sparing.hex()}|", "-j", "RETURN"),
            (*to_node, "-m", "string", "--algo", "bm", "--hex-string", f"|{marker.hex()}|", "-j", "DROP"),
        ]

    def start(self) -> None:
        for rule in self._rules:
            _ipt("-A", CHAIN_OUT, *rule)

    def heal(self) -> None:
        for rule in self._rules:
            _ipt("-D", CHAIN_OUT, *rule, check=False)


class DriverNamespace:
    """A network namespace for a driver, linked to the host; `cut()` and `heal()` the link."""

    address = NS_IP

    def create(self) -> None:
        ip_ns = ("ip", "-n", NETNS)
        _run("ip", "netns", "add", NETNS)
        _run("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
        _run("ip", "link", "set", NS_IF, "netns", NETNS)
        _run("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
        _run("ip", "link", "set", HOST_IF, "up")
        _run(*ip_ns, "link", "set", "lo", "up")
        _run(*ip_ns, "addr", "add", f"{NS_IP}/30", "dev", NS_IF)
        _run(*ip_ns, "link", "set", NS_IF, "up")
        _run(*ip_ns, "route", "add", MAPPED.format("0") + "/24", "via", HOST_IP)
        # Loopback destinations NATed to and from another interface (both sides).
        _run("sysctl", "-qw", f"net.ipv4.conf.{HOST_IF}.route_localnet=1")
        _run("ip", "netns", "exec", NETNS, "sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1")
        in_ns = ("ip", "netns", "exec", NETNS, "iptables", "-w", "-t", "nat")
        for i in (1, 2, 3):
            loopback, mapped = f"127.0.0.{i}", MAPPED.format(i)
            _ipt("-A", CHAIN_NAT, "-i", HOST_IF, "-d", mapped, "-j", "DNAT", "--to-destination", loopback, table="nat")
            ports = () if i > 1 else ("-m", "multiport", "--dports", ",".join(map(str, SERVICE_PORTS)))
            _run(*in_ns, "-A", "OUTPUT", "-d", loopback, "-p", "tcp", *ports, "-j", "DNAT", "--to-destination", mapped)
        _run(*in_ns, "-A", "POSTROUTING", "-o", NS_IF, "-j", "SNAT", "--to-source", NS_IP)

    def cut(self) -> None:
        _ipt("-A", CHAIN_IN, "-i", HOST_IF, "-j", "DROP")
        _ipt("-A", CHAIN_OUT, "-o", HOST_IF, "-j", "DROP")

    def heal(self) -> None:
        _ipt("-D", CHAIN_IN, "-i", HOST_IF, "-j", "DROP", check=False)
        _ipt("-D", CHAIN_OUT, "-o", HOST_IF, "-j", "DROP", check=False)

    def submit(self, cluster_env, library_zip: Path, log: Path, *job_args: str, cores: int = 1, env=None):
        """conftest.submit_to_cluster's spark-submit, run inside the namespace, the driver
        listening (and advertised to the executors) on the namespace's address."""
        return submit_to_cluster(
            cluster_env,
            library_zip,
            log,
            *job_args,
            cores=cores,
            env=env,
            driver_ip=NS_IP,
            launcher=("ip", "netns", "exec", NETNS),
        )


def unreachable(address: str, port: int, timeout_s: float = 2.0) -> bool:
    """A TCP connect to address:port gets no answer (not even a refusal) within the timeout."""
    try:
        socket.create_connection((address, port), timeout=timeout_s).close()
    except TimeoutError:
        return True
    except OSError:
        return False
    return False


def stopped(pid: int) -> bool:
    """The process is stopped (SIGSTOP, state T)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False
