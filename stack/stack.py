"""The local stack: a real single-node Cassandra 5.0 and Kafka 4.x (KRaft) on 127.0.0.1.

Both run as background JVM processes from the jars `scripts/install-jvm` fetched from Maven
Central into .stack/lib/. Data, logs and pid files live under .stack/ (git-ignored).

    python stack/stack.py up [--auth] [--tls] [--kafka-sasl-ssl]
                                                start both (a no-op for what already runs)
    python stack/stack.py down                  stop both by their recorded pids
    python stack/stack.py status                what runs, exit 1 unless both answer
    python stack/stack.py reset                 stop both and delete their data

`--only kafka|cassandra` limits up, down and status to one component.

`up --auth` starts Cassandra with PasswordAuthenticator and CassandraAuthorizer (superuser
cassandra/cassandra). `up --tls` makes its CQL port accept TLS only, with a self-signed
certificate for 127.0.0.1 and localhost that keytool makes once under .stack/tls/ (PKCS12
keystore, random password in a 0600 file); clients trust .stack/tls/ca.pem:
STATESTORE_CASSANDRA_SSL=true STATESTORE_CASSANDRA_SSL_CA=.stack/tls/ca.pem. The two combine.
The mode a node was started with is recorded in .stack/run/, so `status` probes it the same
way; to change it, `down --only cassandra` and `up` again.

`up --kafka-sasl-ssl` makes Kafka's client listener speak SASL_SSL only: TLS with the same
certificate (clients trust .stack/tls/ca.pem) and SCRAM-SHA-512, with a user `statestore`
whose random password is written to .stack/data/kafka-sasl-ssl-users/statestore.password
(0600) when the broker's own log dir (.stack/data/kafka-sasl-ssl) is formatted. `env` prints
the client settings. Like Cassandra's, the mode is recorded in .stack/run/ for `status`.

Ports come from STATESTORE_CASSANDRA_PORT (9042), STATESTORE_CASSANDRA_STORAGE_PORT (7000),
STATESTORE_CASSANDRA_JMX_PORT (7199), STATESTORE_KAFKA_PORT (9092) and
STATESTORE_KAFKA_CONTROLLER_PORT (9093). STATESTORE_STACK_DIR puts the state (.stack/) elsewhere,
e.g. for a second stack beside the first. STATESTORE_CASSANDRA_HEAP sets Cassandra's heap (1g;
each table costs heap whether used or not: a keyspace of hundreds of stores needs more,
BENCHMARKS.md "Hundreds of stores in one keyspace").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# This module is the single node and the command line (its docstring is the help); `--nodes 3`
# hands over to the cluster (cluster.py), and both start their nodes from stack_common.py.
# Imports run one way, stack.py -> cluster.py -> stack_common.py (and stack.py -> two_dc.py ->
# stack_common.py): nothing imports stack.py back.
import cluster
import two_dc
from stack_common import (
    CA_PEM,
    CASSANDRA_START_TIMEOUT_S,
    DATA,
    KAFKA_BROKER_USER,
    KAFKA_CLIENT_USER,
    KAFKA_SASL_SSL_DATA,
    KAFKA_SCRAM_MECHANISM,
    KAFKA_START_TIMEOUT_S,
    KAFKA_USERS,
    KEYSTORE,
    KEYSTORE_PASSWORD,
    LOGS,
    RUN,
    STACK_CONF,
    STATE,
    TLS,
    CassandraMode,
    KafkaMode,
    StackError,
    cassandra_command,
    component_jars,
    ensure_port_free,
    format_kafka_storage,
    kafka_java,
    kafka_password_file,
    probe_cassandra,
    probe_kafka,
    render,
    running_pid,
    spawn,
    stop_process,
    wait_until_up,
    write_private,
)


@dataclass(frozen=True)
class Ports:
    cassandra: int
    cassandra_storage: int
    cassandra_jmx: int
    kafka: int
    kafka_controller: int

    @classmethod
    def from_env(cls) -> Ports:
        def port(name: str, default: int) -> int:
            raw = os.environ.get(name, str(default))
            if not raw.isdigit() or not 0 < int(raw) < 65536:
                raise StackError(f"{name}={raw!r} is not a TCP port (1-65535)")
            return int(raw)

        return cls(
            cassandra=port("STATESTORE_CASSANDRA_PORT", 9042),
            cassandra_storage=port("STATESTORE_CASSANDRA_STORAGE_PORT", 7000),
            cassandra_jmx=port("STATESTORE_CASSANDRA_JMX_PORT", 7199),
            kafka=port("STATESTORE_KAFKA_PORT", 9092),
            kafka_controller=port("STATESTORE_KAFKA_CONTROLLER_PORT", 9093),
        )


# ---------------------------------------------------------------- Cassandra


def _keytool() -> str:
    found = shutil.which("keytool")
    if found:
        return found
    java = shutil.which("java")
    beside = Path(java).resolve().parent / "keytool" if java else None
    if beside is not None and beside.exists():
        return str(beside)
    raise StackError("keytool (from the JDK) is not on PATH; `up --tls` needs it to make the certificate")


def ensure_tls() -> str:
    """Make the TLS material once (kept under STATE/tls/); returns the keystore password.

    A self-signed RSA certificate for IP 127.0.0.1 and DNS localhost in a PKCS12 keystore, and
    the same certificate as PEM (ca.pem) for clients to trust. The password is random, lives in
    a 0600 file and reaches keytool through its environment, never its command line.
    """
    if KEYSTORE.exists() and KEYSTORE_PASSWORD.exists() and CA_PEM.exists():
        return KEYSTORE_PASSWORD.read_text().strip()
    TLS.mkdir(parents=True, exist_ok=True)
    TLS.chmod(0o700)
    keytool = _keytool()
    password = secrets.token_hex(24)
    env = {**os.environ, "STATESTORE_KEYSTORE_PASSWORD": password}
    keystore_tmp, pem_tmp = TLS / "keystore.p12.tmp", TLS / "ca.pem.tmp"
    keystore_tmp.unlink(missing_ok=True)
    pem_tmp.unlink(missing_ok=True)
    store = ["-keystore", str(keystore_tmp), "-storetype", "PKCS12", "-storepass:env", "STATESTORE_KEYSTORE_PASSWORD"]
    steps = [
        [
            keytool,
            "-genkeypair",
            "-alias",
            "cassandra",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            "-validity",
            "3650",
            "-dname",
            "CN=localhost, OU=statestore local stack",
            "-ext",
            "SAN=ip:127.0.0.1,dns:localhost",
            "-keypass:env",
            "STATESTORE_KEYSTORE_PASSWORD",
            *store,
        ],
        [keytool, "-exportcert", "-rfc", "-alias", "cassandra", "-file", str(pem_tmp), *store],
    ]
    for argv in steps:
        result = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise StackError(f"keytool {argv[1]} failed:\n{result.stdout}{result.stderr}")
    write_private(KEYSTORE_PASSWORD, password + "\n")
    keystore_tmp.chmod(0o600)
    os.replace(keystore_tmp, KEYSTORE)
    os.replace(pem_tmp, CA_PEM)  # last: its presence means the set is complete
    print(f"tls: made a self-signed certificate for 127.0.0.1/localhost; clients trust {CA_PEM}")
    return password


def _client_encryption_options(tls: bool) -> str:
    """The cassandra.yaml block that makes the CQL port TLS-only (empty without --tls)."""
    if not tls:
        return ""
    password = ensure_tls()
    # JSON strings are valid YAML double-quoted scalars; Cassandra redacts this block in its log.
    return (
        "client_encryption_options:\n"
        "  enabled: true\n"
        "  optional: false\n"
        f"  keystore: {json.dumps(str(KEYSTORE))}\n"
        f"  keystore_password: {json.dumps(password)}\n"
        "  store_type: PKCS12\n"
    )


SINGLE_NODE_TOPOLOGY = {
    "cluster_name": "statestore-local",
    "snitch": "SimpleSnitch",
    "token_allocation": "allocate_tokens_for_local_replication_factor: 1",
    "address": "127.0.0.1",
    "seeds": "127.0.0.1",
}


def start_cassandra(ports: Ports, auth: bool, tls: bool = False) -> None:
    mode = CassandraMode(auth=auth, tls=tls)
    if running_pid("cassandra"):
        running = CassandraMode.recorded()
        note = "" if running == mode else f" (started with {running.describe()}; `down --only cassandra` to change)"
        print(f"cassandra: already running{note}")
        return
    ensure_port_free(ports.cassandra, "Cassandra CQL", "STATESTORE_CASSANDRA_PORT")
    ensure_port_free(ports.cassandra_storage, "Cassandra storage", "STATESTORE_CASSANDRA_STORAGE_PORT")
    ensure_port_free(ports.cassandra_jmx, "Cassandra JMX", "STATESTORE_CASSANDRA_JMX_PORT")
    data_dir = DATA / "cassandra"
    conf = RUN / "cassandra.yaml"
    render(
        STACK_CONF / "cassandra.yaml",
        conf,
        storage_port=ports.cassandra_storage,
        native_port=ports.cassandra,
        data_dir=data_dir,
        authenticator="PasswordAuthenticator" if auth else "AllowAllAuthenticator",
        authorizer="CassandraAuthorizer" if auth else "AllowAllAuthorizer",
        client_encryption_options=_client_encryption_options(tls),
        **SINGLE_NODE_TOPOLOGY,
    )
    log_dir = LOGS / "cassandra"
    argv = cassandra_command(
        conf,
        data_dir,
        log_dir,
        ports.cassandra_jmx,
        heap=cassandra_heap(),
        # One node, no peers: nothing to wait for in gossip.
        gossip=["-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=0"],
    )
    log = log_dir / "stdout.log"
    mode.record()
    proc = spawn("cassandra", argv, log)
    started = time.monotonic()
    wait_until_up(
        "cassandra", proc, lambda: probe_cassandra(ports.cassandra, auth, tls), CASSANDRA_START_TIMEOUT_S, log
    )
    extra = f", {mode.describe()}" if auth or tls else ""
    print(f"cassandra: up on 127.0.0.1:{ports.cassandra} (pid {proc.pid}{extra}, {time.monotonic() - started:.1f}s)")


# ---------------------------------------------------------------- Kafka


def kafka_client_settings(mode: KafkaMode, port: int, host: str = "127.0.0.1") -> dict[str, str]:
    """The STATESTORE_KAFKA_* settings of a client of the broker started in `mode`."""
    settings = {"STATESTORE_KAFKA_BOOTSTRAP": f"{host}:{port}"}
    if mode.sasl_ssl:
        settings.update(
            {
                "STATESTORE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "STATESTORE_KAFKA_SASL_MECHANISM": KAFKA_SCRAM_MECHANISM,
                "STATESTORE_KAFKA_USERNAME": KAFKA_CLIENT_USER,
                "STATESTORE_KAFKA_PASSWORD_FILE": str(kafka_password_file()),
                "STATESTORE_KAFKA_SSL_CA": str(CA_PEM),
            }
        )
    return settings


def _kafka_users(formatted: bool) -> dict[str, str]:
    """The secured broker's SCRAM users and their passwords: made (random, 0600 files) for a log
    dir about to be formatted, read back for one formatted before."""
    users = {}
    for user in (KAFKA_BROKER_USER, KAFKA_CLIENT_USER):
        path = kafka_password_file(user)
        if formatted:
            if not path.exists():
                raise StackError(
                    f"{KAFKA_SASL_SSL_DATA} was formatted with SCRAM users whose password file {path} is gone: "
                    f"delete {KAFKA_SASL_SSL_DATA} (or `scripts/stack reset`) to start afresh"
                )
            users[user] = path.read_text().strip()
        else:
            users[user] = secrets.token_hex(24)
            KAFKA_USERS.mkdir(parents=True, exist_ok=True)
            KAFKA_USERS.chmod(0o700)
            write_private(path, users[user] + "\n")
    return users


def start_kafka(ports: Ports, sasl_ssl: bool = False) -> None:
    mode = KafkaMode(sasl_ssl=sasl_ssl)
    if running_pid("kafka"):
        running = KafkaMode.recorded()
        note = "" if running == mode else f" (started with {running.describe()}; `down --only kafka` to change)"
        print(f"kafka: already running{note}")
        return
    ensure_port_free(ports.kafka, "Kafka broker", "STATESTORE_KAFKA_PORT")
    ensure_port_free(ports.kafka_controller, "Kafka controller", "STATESTORE_KAFKA_CONTROLLER_PORT")
    jars = component_jars("kafka")
    # The secured broker has a log dir of its own: its SCRAM users are made when it is formatted.
    data_dir = KAFKA_SASL_SSL_DATA if sasl_ssl else DATA / "kafka"
    conf = RUN / "kafka-server.properties"
    values = {
        "node_id": 1,
        "address": "127.0.0.1",
        "quorum": f"controller.quorum.bootstrap.servers=127.0.0.1:{ports.kafka_controller}",
        "broker_port": ports.kafka,
        "controller_port": ports.kafka_controller,
        "data_dir": data_dir,
        "replication": 1,
        "min_insync": 1,
    }
    render(STACK_CONF / "kafka-server.properties", conf, **values)
    users = None
    if sasl_ssl:
        users = _kafka_users(formatted=(data_dir / "meta.properties").exists())
        overlay = string.Template((STACK_CONF / "kafka-sasl-ssl.properties").read_text()).substitute(
            {k: str(v) for k, v in values.items()},
            keystore=KEYSTORE,
            keystore_password=ensure_tls(),
            ca_pem=CA_PEM,
            broker_user=KAFKA_BROKER_USER,
            broker_password=users[KAFKA_BROKER_USER],
        )
        write_private(conf, conf.read_text() + "\n" + overlay)
    log_dir = LOGS / "kafka"
    format_kafka_storage(jars, log_dir, conf, data_dir, cluster_id=None, scram_users=users)
    log = log_dir / "stdout.log"
    mode.record()
    proc = spawn("kafka", kafka_java(jars, log_dir, "kafka.Kafka", str(conf)), log)
    started = time.monotonic()
    wait_until_up("kafka", proc, lambda: probe_kafka(ports.kafka, mode=mode), KAFKA_START_TIMEOUT_S, log)
    extra = f", {mode.describe()}" if sasl_ssl else ""
    print(f"kafka: up on 127.0.0.1:{ports.kafka} (pid {proc.pid}{extra}, {time.monotonic() - started:.1f}s)")


# ---------------------------------------------------------------- commands


COMPONENTS = ("kafka", "cassandra")


def up(auth: bool, only: tuple[str, ...] = COMPONENTS, tls: bool = False, kafka_sasl_ssl: bool = False) -> None:
    ports = Ports.from_env()
    STATE.mkdir(parents=True, exist_ok=True)
    # Kafka first: it is quick, and Cassandra's start-up then has the CPU to itself.
    if "kafka" in only:
        start_kafka(ports, kafka_sasl_ssl)
    if "cassandra" in only:
        start_cassandra(ports, auth, tls)


def down(only: tuple[str, ...] = COMPONENTS) -> None:
    for name in only:
        print(f"{name}: {'stopped' if stop_process(name) else 'was not running'}")


def status(only: tuple[str, ...] = COMPONENTS) -> bool:
    rows = single_status_rows(only)
    for row in rows:
        print(describe(row))
    return all(row["state"] == "running" for row in rows)


def describe(row: dict) -> str:
    """One status row for people: what runs where, and whether it answers."""
    where = f"{row['address']}, pid {row['pid']}"
    shown = {"stopped": "not running", "running": f"running ({where}), answering"}
    return f"{row['name']}: {shown.get(row['state'], f'running ({where}) but not answering')}"


def reset() -> None:
    down()
    two_dc.down()  # the cluster tier's two-data-center nodes, if a test left them running
    cluster_dir = STATE / "cluster"
    for path in (DATA, LOGS, cluster_dir):
        shutil.rmtree(path, ignore_errors=True)
    print(f"deleted {DATA}, {LOGS} and {cluster_dir}")


def single_status_rows(only: tuple[str, ...] = COMPONENTS) -> list[dict]:
    ports = Ports.from_env()
    probes = {
        "cassandra": lambda: probe_cassandra(ports.cassandra, **dataclasses.asdict(CassandraMode.recorded())),
        "kafka": lambda: probe_kafka(ports.kafka, mode=KafkaMode.recorded()),
    }
    rows = []
    for name in (n for n in probes if n in only):
        pid = running_pid(name)
        state = "stopped"
        if pid is not None:
            try:
                probes[name]()
                state = "running"
            except Exception:  # noqa: BLE001 - any probe failure means "not answering"
                state = "not answering"
        rows.append({"name": name, "address": "127.0.0.1", "pid": pid, "state": state})
    return rows


def cassandra_heap() -> str:
    """The single node's heap from STATESTORE_CASSANDRA_HEAP (default 1g), checked before start."""
    heap = os.environ.get("STATESTORE_CASSANDRA_HEAP", "1g").strip().lower()
    if not re.fullmatch(r"[1-9][0-9]*[mg]", heap):
        raise SystemExit(f"STATESTORE_CASSANDRA_HEAP={heap!r}: give a size like 1g or 3072m")
    return heap


def single_connection_env() -> dict[str, str]:
    ports = Ports.from_env()
    kafka_mode = KafkaMode.recorded() if running_pid("kafka") else KafkaMode()
    return {
        "STATESTORE_CASSANDRA_HOSTS": "127.0.0.1",
        "STATESTORE_CASSANDRA_PORT": str(ports.cassandra),
        **kafka_client_settings(kafka_mode, ports.kafka),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="stack", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {
        "up": "start Cassandra and Kafka (--nodes 3: the local cluster, with Spark standalone)",
        "down": "stop Cassandra and Kafka (--nodes 3: the local cluster)",
        "status": "report what runs; exit 1 unless all answer",
        "reset": "stop everything (single node and cluster) and delete the data",
        "stop-all": "stop every server of this stack dir: the cluster, the two-dc nodes, the single node",
        "stop": "stop one process by name (e.g. cassandra-2, kafka-3, spark-worker-1)",
        "start": "start one stopped process again by name",
        "env": "print the STATESTORE_* settings for clients, as shell exports (eval them)",
    }
    for name, help_text in commands.items():
        command = sub.add_parser(name, help=help_text)
        if name == "env":
            command.add_argument("--nodes", type=int, choices=(1, 3), default=1, help="3: the local cluster's")
            continue
        if name in ("stop", "start"):
            command.add_argument("name", help="a name from `status --nodes 3 --json` (or cassandra, kafka)")
            if name == "stop":
                command.add_argument("--kill", action="store_true", help="SIGKILL at once, as a crash would")
            continue
        if name not in ("reset", "stop-all"):
            command.add_argument(
                "--only",
                choices=COMPONENTS,
                action="append",
                help="just this component (repeatable; default: both)",
            )
            command.add_argument(
                "--nodes",
                type=int,
                choices=(1, 3),
                default=1,
                help="1: the single-node stack (default); 3: the local cluster (stack/cluster.py)",
            )
        if name == "status":
            command.add_argument(
                "--json", action="store_true", help='print every process as {"name","address","pid","state"}'
            )
        if name == "up":
            command.add_argument(
                "--auth",
                action="store_true",
                help="start Cassandra with PasswordAuthenticator (user cassandra/cassandra)",
            )
            command.add_argument(
                "--tls",
                action="store_true",
                help=f"CQL over TLS only; clients trust {CA_PEM} (made once with keytool)",
            )
            command.add_argument(
                "--kafka-sasl-ssl",
                action="store_true",
                help=f"Kafka's client listener over SASL_SSL only ({KAFKA_SCRAM_MECHANISM}, user "
                f"{KAFKA_CLIENT_USER}, password in {kafka_password_file()}; TLS as --tls); `env` prints the settings",
            )
    args = parser.parse_args(argv)
    only = tuple(getattr(args, "only", None) or COMPONENTS)
    clustered = getattr(args, "nodes", 1) > 1
    try:
        if args.command == "env":
            settings = cluster.connection_env(args.nodes) if clustered else single_connection_env()
            print("\n".join(f"export {key}={value}" for key, value in settings.items()))
        elif args.command in ("stop", "start") and args.name not in COMPONENTS:
            if args.command == "stop":
                cluster.stop(args.name, kill=args.kill)
            else:
                cluster.start(args.name)
        elif args.command == "stop":
            _stop_single(args.name, args.kill)
        elif args.command == "start":
            cassandra = CassandraMode.recorded()
            up(cassandra.auth, (args.name,), cassandra.tls, KafkaMode.recorded().sasl_ssl)
        elif args.command == "up":
            if clustered and (args.auth or args.tls or args.kafka_sasl_ssl):
                raise StackError(
                    "--auth, --tls and --kafka-sasl-ssl are for the single-node stack; the cluster runs without them"
                )
            cluster.up(args.nodes) if clustered else up(args.auth, only, args.tls, args.kafka_sasl_ssl)
        elif args.command == "down":
            cluster.down() if clustered else down(only)
        elif args.command == "status":
            rows = cluster.status_rows() if clustered else single_status_rows(only)
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                for row in rows:
                    print(describe(row))
            return 0 if all(row["state"] == "running" for row in rows) else 1
        elif args.command == "stop-all":
            stop_all()
        else:
            cluster.down()
            reset()
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 2
    return 0


def stop_all() -> None:
    """Stop every server this stack dir recorded a pid for (cluster, two-dc nodes, single node),
    saying which; the ones not running are not mentioned."""
    names = [m.name for m in reversed(cluster.members(cluster.recorded_nodes() or cluster.REPLICATION))]
    names += [node.name for node in two_dc.NODES] + list(COMPONENTS)
    running = [name for name in names if running_pid(name) is not None]
    for name in running:
        stop_process(name)
        print(f"{name}: stopped")
    if not running:
        print(f"stack: nothing of {STATE} was running")


def _stop_single(name: str, kill: bool) -> None:
    pid = running_pid(name)
    if pid is not None and kill:
        os.kill(pid, signal.SIGKILL)
    print(f"{name}: {'stopped' if stop_process(name) or pid else 'was not running'}")


if __name__ == "__main__":
    sys.exit(main())
