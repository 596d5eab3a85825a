"""The local cluster: what a real deployment has, on loopback addresses 127.0.0.1-127.0.0.3.

    cassandra-1..3   Cassandra 5.0, one data center dc1, racks r1-r3 (GossipingPropertyFileSnitch),
                     CQL port 9142 on each address, storage port 7100, JMX ports 7299-7301
    kafka-1..3       Kafka 4.x brokers in KRaft, each also a voter of a static 3-voter controller
                     quorum; port 9192 on each address (controllers 9193); internal topics and
                     new topics default to replication factor 3, min.insync.replicas 2
    spark-master     Spark standalone master from pyspark's own spark-class: spark://127.0.0.1:7077
                     (web UI on 127.0.0.1:18080)
    spark-worker-1,2 Spark standalone workers (1 core each) on 127.0.0.2 and 127.0.0.3

The ports differ from the single-node stack's, so both can run at once (the test suite does).
Linux routes all of 127/8 to loopback, so nothing here listens beyond the machine.

Workers run from their own directories under .stack/cluster/, with a Python that has the
project's dependencies but not the project: executors import the library only from what the
job ships (`--py-files dist/statestore.zip`), as on a real cluster.

Started through stack.py (`scripts/stack up --nodes 3`, `stop cassandra-2`, ...). It builds its
nodes from stack_common.py, as the single node does, and never imports stack.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import stack_common as common
from stack_common import LOGS, PROJECT, RUN, STACK_CONF, STATE, StackError

CLUSTER = STATE / "cluster"
CQL_PORT = 9142
STORAGE_PORT = 7100
JMX_PORT_BASE = 7298  # node i listens on JMX port 7298 + i
KAFKA_PORT = 9192
KAFKA_CONTROLLER_PORT = 9193
SPARK_MASTER_PORT = 7077
SPARK_MASTER_UI_PORT = 18080
SPARK_WORKER_UI_PORT_BASE = 18080  # worker i: 18080 + i
SPARK_MASTER_URL = f"spark://127.0.0.1:{SPARK_MASTER_PORT}"
DC = "dc1"
REPLICATION = 3
MIN_INSYNC = 2
EXECUTOR_PYTHON_DIR = CLUSTER / "executor-python"
RECORD = RUN / "cluster.json"
WORKER_CORES = 1
WORKER_MEMORY = "1536m"
DAEMON_MEMORY = "256m"
CASSANDRA_HEAP = "768m"
KAFKA_HEAP = "384m"
WORKERS = 2


@dataclass(frozen=True)
class Member:
    """One process of the cluster."""

    kind: str  # cassandra | kafka | spark-master | spark-worker
    index: int  # 1-based; 0 for the master

    @property
    def name(self) -> str:
        return self.kind if self.kind == "spark-master" else f"{self.kind}-{self.index}"

    @property
    def address(self) -> str:
        if self.kind == "spark-master":
            return "127.0.0.1"
        if self.kind == "spark-worker":
            return f"127.0.0.{self.index + 1}"
        return f"127.0.0.{self.index}"

    @property
    def jmx_port(self) -> int:
        return JMX_PORT_BASE + self.index


def members(nodes: int = REPLICATION) -> list[Member]:
    """Every process, in start order: brokers, Cassandra nodes, master, workers."""
    return [
        *(Member("kafka", i) for i in range(1, nodes + 1)),
        *(Member("cassandra", i) for i in range(1, nodes + 1)),
        Member("spark-master", 0),
        *(Member("spark-worker", i) for i in range(1, WORKERS + 1)),
    ]


def member(name: str) -> Member:
    for candidate in members(recorded_nodes() or REPLICATION):
        if candidate.name == name:
            return candidate
    known = ", ".join(m.name for m in members())
    raise StackError(f"no cluster process is called {name!r}; the cluster has {known}")


def recorded_nodes() -> int | None:
    """How many nodes the cluster was brought up with, or None if it never was."""
    try:
        return int(json.loads(RECORD.read_text())["nodes"])
    except (FileNotFoundError, ValueError, KeyError):
        return None


def connection_env(nodes: int = REPLICATION) -> dict[str, str]:
    """The STATESTORE_* settings that point the library, CLI, jobs and tests at the cluster."""
    hosts = ",".join(f"127.0.0.{i}" for i in range(1, nodes + 1))
    return {
        "STATESTORE_CASSANDRA_HOSTS": hosts,
        "STATESTORE_CASSANDRA_PORT": str(CQL_PORT),
        "STATESTORE_CASSANDRA_LOCAL_DC": DC,
        "STATESTORE_KAFKA_BOOTSTRAP": ",".join(f"{h}:{KAFKA_PORT}" for h in hosts.split(",")),
        "STATESTORE_KAFKA_TOPIC_REPLICATION": str(REPLICATION),
        "STATESTORE_KAFKA_MIN_INSYNC_REPLICAS": str(MIN_INSYNC),
        # Cassandra's local JMX listens on 127.0.0.1 whatever the node's address: ports tell them apart.
        "STATESTORE_NODETOOL_HOSTS": ",".join(f"127.0.0.1:{JMX_PORT_BASE + i}" for i in range(1, nodes + 1)),
    }


# ---------------------------------------------------------------- Cassandra


def _start_cassandra(node: Member, nodes: int) -> None:
    run_dir = CLUSTER / node.name
    conf = run_dir / "cassandra.yaml"
    data_dir = CLUSTER / node.name / "data"
    common.render(
        STACK_CONF / "cassandra.yaml",
        conf,
        cluster_name="statestore-cluster",
        snitch="GossipingPropertyFileSnitch",
        token_allocation="",
        address=node.address,
        # Two seeds, so any one node can restart while the others still find each other.
        seeds=",".join(f"127.0.0.{i}" for i in range(1, min(nodes, 2) + 1)),
        storage_port=STORAGE_PORT,
        native_port=CQL_PORT,
        data_dir=data_dir,
        authenticator="AllowAllAuthenticator",
        authorizer="AllowAllAuthorizer",
        client_encryption_options="",
    )
    rackdc = run_dir / "cassandra-rackdc.properties"
    rackdc.write_text(f"dc={DC}\nrack=r{node.index}\n")
    argv = common.cassandra_command(
        conf,
        data_dir,
        LOGS / node.name,
        node.jmx_port,
        heap=CASSANDRA_HEAP,
        # Peers exist: give gossip a few seconds to exchange the ring and the schema.
        gossip=["-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=3000"],
        extra=(f"-Dcassandra-rackdc.properties={rackdc.as_uri()}",),
    )
    log = LOGS / node.name / "stdout.log"
    proc = common.spawn(node.name, argv, log, cwd=run_dir)
    started = time.monotonic()
    common.wait_until_up(
        node.name,
        proc,
        lambda: common.probe_cassandra(CQL_PORT, host=node.address),
        common.CASSANDRA_START_TIMEOUT_S,
        log,
    )
    print(f"{node.name}: up on {node.address}:{CQL_PORT} (pid {proc.pid}, {time.monotonic() - started:.1f}s)")


# ---------------------------------------------------------------- Kafka


def _kafka_cluster_id() -> str:
    path = CLUSTER / "kafka-cluster-id"
    if not path.exists():
        import base64
        import uuid

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
    return path.read_text().strip()


def _spawn_kafka(broker: Member, nodes: int) -> subprocess.Popen:
    run_dir = CLUSTER / broker.name
    conf = run_dir / "kafka-server.properties"
    data_dir = run_dir / "data"
    voters = ",".join(f"{i}@127.0.0.{i}:{KAFKA_CONTROLLER_PORT}" for i in range(1, nodes + 1))
    common.render(
        STACK_CONF / "kafka-server.properties",
        conf,
        node_id=broker.index,
        address=broker.address,
        quorum=f"controller.quorum.voters={voters}",
        broker_port=KAFKA_PORT,
        controller_port=KAFKA_CONTROLLER_PORT,
        data_dir=data_dir,
        replication=REPLICATION,
        min_insync=MIN_INSYNC,
    )
    jars = common.component_jars("kafka")
    log_dir = LOGS / broker.name
    common.format_kafka_storage(jars, log_dir, conf, data_dir, cluster_id=_kafka_cluster_id())
    argv = common.kafka_java(jars, log_dir, "kafka.Kafka", str(conf), heap=KAFKA_HEAP)
    return common.spawn(broker.name, argv, log_dir / "stdout.log", cwd=run_dir)


def _wait_kafka(broker: Member, proc: subprocess.Popen, started: float) -> None:
    log = LOGS / broker.name / "stdout.log"
    common.wait_until_up(
        broker.name,
        proc,
        lambda: common.probe_kafka(KAFKA_PORT, host=broker.address),
        common.KAFKA_START_TIMEOUT_S,
        log,
    )
    print(f"{broker.name}: up on {broker.address}:{KAFKA_PORT} (pid {proc.pid}, {time.monotonic() - started:.1f}s)")


# ---------------------------------------------------------------- Spark standalone


def executor_python() -> Path:
    """A Python with the project's dependencies but not the project itself, made once.

    A venv without pip whose only addition is a .pth naming the project venv's site-packages:
    the packages there import, but the .pth files there (the editable install of statestore)
    are not processed, because Python reads .pth files only in its own site directories.
    """
    python = EXECUTOR_PYTHON_DIR / "bin" / "python"
    if python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(EXECUTOR_PYTHON_DIR)], check=True)
    site = EXECUTOR_PYTHON_DIR / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "statestore-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    check = subprocess.run(
        [str(python), "-c", "import pyspark, cassandra, pyarrow\nimport statestore"],
        capture_output=True,
        text=True,
        cwd=EXECUTOR_PYTHON_DIR,
    )
    if "No module named 'statestore'" not in check.stderr:
        raise StackError(f"the executors' Python must have the dependencies but not statestore:\n{check.stderr}")
    return python


def _spark_env(address: str) -> dict[str, str]:
    """A worker machine's environment: its own Python first on PATH, nothing of the project."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHON", "VIRTUAL_ENV", "SPARK_"))}
    env["PATH"] = f"{executor_python().parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["SPARK_LOCAL_IP"] = address  # also where the web UI binds (default: every interface)
    env["SPARK_DAEMON_MEMORY"] = DAEMON_MEMORY
    env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(
        [
            f"-Dlog4j.configurationFile={(PROJECT / 'statestore' / 'conn' / 'spark-log4j2.properties').as_uri()}",
            # A taken port is an error, not a silent move to the next one (a second master).
            "-Dspark.port.maxRetries=0",
            # Marks the process as this stack's, so a recycled pid is never taken for it.
            f"-Dstatestore.stack={STATE}",
        ]
    )
    return env


def spark_class() -> str:
    path = Path(sys.executable).parent / "spark-class"
    if not path.exists():
        raise StackError(f"pyspark's spark-class is not in {path.parent}: run `make install` first")
    return str(path)


def spark_master_state() -> dict:
    """The master's own JSON view: its status and every worker it knows."""
    with urllib.request.urlopen(f"http://127.0.0.1:{SPARK_MASTER_UI_PORT}/json/", timeout=3) as response:
        return json.load(response)


def _probe_spark(node: Member) -> None:
    state = spark_master_state()
    if node.kind == "spark-master":
        if state.get("status") != "ALIVE":
            raise RuntimeError(f"master status {state.get('status')}")
        return
    if not any(w.get("host") == node.address and w.get("state") == "ALIVE" for w in state.get("workers", [])):
        raise RuntimeError(f"no live worker on {node.address} registered with the master")


def _start_spark(node: Member) -> None:
    run_dir = CLUSTER / node.name
    run_dir.mkdir(parents=True, exist_ok=True)
    if node.kind == "spark-master":
        common.ensure_port_free(SPARK_MASTER_PORT, "Spark master", None)
        common.ensure_port_free(SPARK_MASTER_UI_PORT, "Spark master web UI", None)
        args = [
            "org.apache.spark.deploy.master.Master",
            *("--host", node.address, "--port", str(SPARK_MASTER_PORT)),
            *("--webui-port", str(SPARK_MASTER_UI_PORT)),
        ]
    else:
        args = [
            "org.apache.spark.deploy.worker.Worker",
            SPARK_MASTER_URL,
            *("--host", node.address, "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY),
            *("--webui-port", str(SPARK_WORKER_UI_PORT_BASE + node.index), "--work-dir", str(run_dir / "work")),
        ]
    log = LOGS / node.name / "stdout.log"
    # spark-class exec()s java, so the recorded pid is the JVM's own.
    proc = common.spawn(node.name, [spark_class(), *args], log, cwd=run_dir, env=_spark_env(node.address))
    started = time.monotonic()
    common.wait_until_up(node.name, proc, lambda: _probe_spark(node), 90, log)
    print(f"{node.name}: up on {node.address} (pid {proc.pid}, {time.monotonic() - started:.1f}s)")


# ---------------------------------------------------------------- commands


def start(name: str) -> None:
    """Start one process of the cluster again (a no-op if it runs)."""
    node = member(name)
    nodes = recorded_nodes() or REPLICATION
    if common.running_pid(node.name):
        print(f"{node.name}: already running")
        return
    if node.kind == "cassandra":
        _start_cassandra(node, nodes)
    elif node.kind == "kafka":
        started = time.monotonic()
        _wait_kafka(node, _spawn_kafka(node, nodes), started)
    else:
        _start_spark(node)


def stop(name: str, kill: bool = False) -> None:
    """Stop one process: gracefully (SIGTERM, then SIGKILL after a minute) or, with `kill`, at once."""
    node = member(name)
    pid = common.running_pid(node.name)
    if pid is not None and kill:
        os.kill(pid, 9)
        while common.running_pid(node.name) == pid:
            time.sleep(0.05)
    print(f"{node.name}: {'stopped' if common.stop_process(node.name) or pid else 'was not running'}")


def up(nodes: int = REPLICATION) -> None:
    if nodes != REPLICATION:
        raise StackError(f"the local cluster has {REPLICATION} nodes (--nodes {REPLICATION}); got --nodes {nodes}")
    RUN.mkdir(parents=True, exist_ok=True)
    CLUSTER.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps({"nodes": nodes}) + "\n")
    executor_python()
    started = time.monotonic()
    brokers = [m for m in members(nodes) if m.kind == "kafka"]
    # The quorum needs a majority of voters: start every broker, then wait for each.
    spawned = {b.name: _spawn_kafka(b, nodes) for b in brokers if not common.running_pid(b.name)}
    for broker in brokers:
        if broker.name in spawned:
            _wait_kafka(broker, spawned[broker.name], started)
        else:
            print(f"{broker.name}: already running")
    # Cassandra nodes one at a time: a node joins the ring only after the previous one is in.
    for node in members(nodes):
        if node.kind != "kafka":
            start(node.name)
    print(f"cluster: up in {time.monotonic() - started:.1f}s; settings for clients:")
    for key, value in connection_env(nodes).items():
        print(f"  {key}={value}")


def down() -> None:
    for node in reversed(members(recorded_nodes() or REPLICATION)):
        print(f"{node.name}: {'stopped' if common.stop_process(node.name) else 'was not running'}")


def _state(node: Member) -> str:
    if common.running_pid(node.name) is None:
        return "stopped"
    try:
        if node.kind == "cassandra":
            common.probe_cassandra(CQL_PORT, host=node.address)
        elif node.kind == "kafka":
            common.probe_kafka(KAFKA_PORT, host=node.address)
        else:
            _probe_spark(node)
    except Exception:  # noqa: BLE001 - any probe failure means "not answering"
        return "not answering"
    return "running"


def status_rows() -> list[dict]:
    return [
        {"name": n.name, "address": n.address, "pid": common.running_pid(n.name), "state": _state(n)}
        for n in members(recorded_nodes() or REPLICATION)
    ]


def rss_bytes() -> int:
    """Resident memory of every cluster process (the JVMs; spark-class exec()s into java)."""
    total = 0
    for node in members(recorded_nodes() or REPLICATION):
        pid = common.running_pid(node.name)
        if pid is not None:
            total += _rss_of_tree(pid)
    return total


def _rss_of_tree(pid: int) -> int:
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return total
    return total + sum(_rss_of_tree(int(child)) for child in children)
