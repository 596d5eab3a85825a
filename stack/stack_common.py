"""What the local stack's single node (stack.py) and the local cluster (cluster.py) share: where
the stack's state lives (.stack/, or STATESTORE_STACK_DIR), StackError, the processes (pid
files, start, stop, waiting until a node answers), rendering a server config from its template
in stack/, and the building blocks of a Cassandra node and a Kafka broker (their java command
lines, the broker's storage format, the probes, the modes a node was started in).

The rule it keeps: it imports nothing of stack/, so the imports run one way only,
stack.py -> cluster.py -> stack_common.py (and stack.py -> stack_common.py). Named
stack_common, not common: the scripts and the tests import it as a top-level module (with
stack/ on the path), where a name as plain as `common` could be shadowed by, or shadow, an
installed distribution's top-level package.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import socket
import string
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
STACK_CONF = PROJECT / "stack"
STATE = Path(os.environ.get("STATESTORE_STACK_DIR", PROJECT / ".stack"))
LIB = STATE / "lib"
RUN = STATE / "run"
LOGS = STATE / "logs"
DATA = STATE / "data"
TLS = STATE / "tls"
KEYSTORE = TLS / "keystore.p12"
KEYSTORE_PASSWORD = TLS / "keystore.password"
CA_PEM = TLS / "ca.pem"
# `up --kafka-sasl-ssl`: SCRAM users made when the secured broker's log dir is formatted, their
# passwords beside it (`reset` deletes both together).
KAFKA_SASL_SSL_DATA = DATA / "kafka-sasl-ssl"
KAFKA_USERS = DATA / "kafka-sasl-ssl-users"
KAFKA_SCRAM_MECHANISM = "SCRAM-SHA-512"
KAFKA_CLIENT_USER = "statestore"
KAFKA_BROKER_USER = "broker"

CASSANDRA_START_TIMEOUT_S = 180
KAFKA_START_TIMEOUT_S = 90
STOP_TIMEOUT_S = 60


class StackError(RuntimeError):
    """A stack operation that cannot go on; the message says how to fix it."""


# ---------------------------------------------------------------- processes


def pid_file(name: str) -> Path:
    return RUN / f"{name}.pid"


def mode_file(name: str) -> Path:
    return RUN / f"{name}.mode.json"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by the owner only (it may hold a password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def running_pid(name: str) -> int | None:
    """The pid recorded for `name` if that process still lives, else None."""
    try:
        pid = int(pid_file(name).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    # A recycled pid would belong to some other program: check it is our JVM.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if str(STATE).encode() in cmdline else None


def ensure_port_free(port: int, what: str, env_name: str | None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            how = f", or choose another port with {env_name}=<port>" if env_name else ""
            raise StackError(
                f"port {port} on 127.0.0.1 ({what}) is already taken by another process. Stop that process{how}."
            ) from None


def component_jars(component: str) -> list[Path]:
    jars = sorted((LIB / component).glob("*.jar"))
    if not jars:
        raise StackError(f"no {component} jars in {LIB / component}: run `make install` (or scripts/install-jvm) first")
    return jars


def spawn(name: str, argv: list[str], log: Path, cwd: Path = STATE, env: dict | None = None) -> subprocess.Popen:
    RUN.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            env=env,
        )
    pid_file(name).write_text(str(proc.pid))
    return proc


def stop_process(name: str) -> bool:
    pid = running_pid(name)
    if pid is None:
        pid_file(name).unlink(missing_ok=True)
        mode_file(name).unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and running_pid(name) == pid:
        time.sleep(0.3)
    if running_pid(name) == pid:
        os.kill(pid, signal.SIGKILL)
        while running_pid(name) == pid:
            time.sleep(0.1)
    pid_file(name).unlink(missing_ok=True)
    mode_file(name).unlink(missing_ok=True)
    return True


def wait_until_up(name: str, proc: subprocess.Popen, probe, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"{name} exited during start-up; see {log}")
        try:
            probe()
            return
        except Exception as exc:  # noqa: BLE001 - any failure just means "not ready yet"
            last_error = exc
            time.sleep(1.0)
    raise StackError(f"{name} did not answer within {timeout_s:.0f}s ({last_error}); see {log}")


# ---------------------------------------------------------------- server configs


def render(template: Path, target: Path, **values: object) -> None:
    text = string.Template(template.read_text()).substitute({k: str(v) for k, v in values.items()})
    write_private(target, text)  # a rendered cassandra.yaml may hold the keystore password


# ---------------------------------------------------------------- Cassandra


@dataclass(frozen=True)
class CassandraMode:
    """How a Cassandra node was started: what a client (and the probe) needs to reach it."""

    auth: bool = False
    tls: bool = False

    def describe(self) -> str:
        flags = [f for f, on in (("--auth", self.auth), ("--tls", self.tls)) if on]
        return " ".join(flags) or "no --auth/--tls"

    @classmethod
    def recorded(cls) -> CassandraMode:
        """The mode of the running node; a node started before modes were recorded is plain."""
        try:
            raw = json.loads(mode_file("cassandra").read_text())
        except (FileNotFoundError, ValueError):
            return cls()
        return cls(auth=bool(raw.get("auth")), tls=bool(raw.get("tls")))

    def record(self) -> None:
        RUN.mkdir(parents=True, exist_ok=True)
        mode_file("cassandra").write_text(json.dumps({"auth": self.auth, "tls": self.tls}) + "\n")


def probe_cassandra(port: int, auth: bool = False, tls: bool = False, host: str = "127.0.0.1") -> str:
    """Run a real CQL query on the node at `host`; returns Cassandra's release version.

    With `tls` the connection trusts only STATE/tls/ca.pem and checks that it names 127.0.0.1;
    with `auth` it logs in as cassandra/cassandra.
    """
    import ssl

    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    provider = PlainTextAuthProvider("cassandra", "cassandra") if auth else None
    context = None
    if tls:
        context = ssl.create_default_context(cafile=str(CA_PEM))
        context.check_hostname = True
    # Only this node answers the probe: in a cluster the driver would otherwise route the
    # query to whichever node is up.
    only_this_node = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    cluster = Cluster(
        [host],
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: only_this_node},
        auth_provider=provider,
        ssl_context=context,
        connect_timeout=3,
        control_connection_timeout=3,
    )
    try:
        session = cluster.connect()
        return session.execute("SELECT release_version FROM system.local").one()[0]
    finally:
        cluster.shutdown()


def cassandra_command(
    conf: Path, data_dir: Path, log_dir: Path, jmx_port: int, heap: str, gossip: list[str], extra: tuple[str, ...] = ()
) -> list[str]:
    """The java command line of one Cassandra node rendered into `conf`."""
    jars = component_jars("cassandra")
    jamm = next((j for j in jars if j.name.startswith("jamm-")), None)
    if jamm is None:
        raise StackError(f"the jamm agent jar is missing from {LIB / 'cassandra'}; rerun scripts/install-jvm")
    jpms = [
        line.strip()
        for line in (STACK_CONF / "jvm17-server.options").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return [
        "java",
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-Xss512k",
        "-XX:+UseG1GC",
        "-XX:MaxDirectMemorySize=512m",
        *jpms,
        f"-javaagent:{jamm}",
        f"-Dcassandra.config={conf.as_uri()}",
        "-Dcassandra-foreground=yes",
        f"-Dcassandra.storagedir={data_dir}",
        f"-Dcassandra.logdir={log_dir}",
        f"-Dlogback.configurationFile={(STACK_CONF / 'logback.xml').as_uri()}",
        f"-Dcassandra.jmx.local.port={jmx_port}",
        *gossip,
        "-Dcassandra.superuser_setup_delay_ms=0",
        *extra,
        "-cp",
        ":".join(str(j) for j in jars),
        "org.apache.cassandra.service.CassandraDaemon",
    ]


# ---------------------------------------------------------------- Kafka


@dataclass(frozen=True)
class KafkaMode:
    """How the single broker was started: what a client (and the probe) needs to reach it."""

    sasl_ssl: bool = False

    def describe(self) -> str:
        return "--kafka-sasl-ssl" if self.sasl_ssl else "no --kafka-sasl-ssl"

    @classmethod
    def recorded(cls) -> KafkaMode:
        try:
            raw = json.loads(mode_file("kafka").read_text())
        except (FileNotFoundError, ValueError):
            return cls()
        return cls(sasl_ssl=bool(raw.get("sasl_ssl")))

    def record(self) -> None:
        RUN.mkdir(parents=True, exist_ok=True)
        mode_file("kafka").write_text(json.dumps({"sasl_ssl": self.sasl_ssl}) + "\n")


def kafka_password_file(user: str = KAFKA_CLIENT_USER) -> Path:
    """Where the secured broker's SCRAM user `user` keeps its password (0600)."""
    return KAFKA_USERS / f"{user}.password"


def probe_kafka(port: int, host: str = "127.0.0.1", mode: KafkaMode | None = None) -> int:
    """Fetch real cluster metadata from the broker at `host`; returns the number of brokers.
    With `mode.sasl_ssl`: over TLS trusting only STATE/tls/ca.pem, as the SCRAM user statestore."""
    from confluent_kafka.admin import AdminClient, NewTopic

    # librdkafka prints every refused connection while the broker starts: log them quietly.
    quiet = logging.getLogger("stack.kafka-probe")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    security = {}
    if mode is not None and mode.sasl_ssl:
        security = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": KAFKA_SCRAM_MECHANISM,
            "sasl.username": KAFKA_CLIENT_USER,
            "sasl.password": kafka_password_file().read_text().strip(),
            "ssl.ca.location": str(CA_PEM),
        }
    admin = AdminClient({"bootstrap.servers": f"{host}:{port}", "socket.timeout.ms": 3000, "logger": quiet, **security})
    metadata = admin.list_topics(timeout=3)
    if not metadata.brokers:
        raise RuntimeError("no broker in metadata yet")
    # Metadata answers while the broker is still fenced; a validated (not executed) topic
    # creation only succeeds once it can take partitions.
    probe = NewTopic("statestore-readiness-probe", num_partitions=1, replication_factor=1)
    admin.create_topics([probe], validate_only=True, request_timeout=3)[probe.topic].result(timeout=5)
    return len(metadata.brokers)


def kafka_java(jars: list[Path], log_dir: Path, main: str, *args: str, heap: str = "512m") -> list[str]:
    return [
        "java",
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-XX:+UseG1GC",
        f"-Dkafka.logs.dir={log_dir}",
        f"-Dlog4j2.configurationFile={STACK_CONF / 'kafka-log4j2.properties'}",
        "-cp",
        ":".join(str(j) for j in jars),
        main,
        *args,
    ]


def format_kafka_storage(
    jars: list[Path],
    log_dir: Path,
    conf: Path,
    data_dir: Path,
    cluster_id: str | None,
    scram_users: dict[str, str] | None = None,
) -> None:
    """Format a broker's log dir once: a standalone controller without `cluster_id`, else a
    voter of the static quorum in its properties, all voters sharing `cluster_id`.
    `scram_users` (user -> password) are created with SCRAM-SHA-512 credentials; the tool reads
    the main class and its arguments from a 0600 argument file (java @file), so the passwords
    never appear on a command line."""
    log_dir.mkdir(parents=True, exist_ok=True)
    if (data_dir / "meta.properties").exists():
        return
    standalone = cluster_id is None
    cluster_id = cluster_id or base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    # --cluster-id=ID, not -t ID: a random id may start with "-", which would read as an option.
    tool = [
        "kafka.tools.StorageTool",
        "format",
        *(["--standalone"] if standalone else []),
        f"--cluster-id={cluster_id}",
    ]
    tool += ["-c", str(conf)]
    for user, password in (scram_users or {}).items():
        tool += ["--add-scram", f"{KAFKA_SCRAM_MECHANISM}=[name={user},password={password}]"]
    argfile = RUN / f"kafka-format-{uuid.uuid4().hex[:8]}.args"
    write_private(argfile, "\n".join(json.dumps(arg) for arg in tool) + "\n")
    try:
        fmt = kafka_java(jars, log_dir, f"@{argfile}")
        result = subprocess.run(fmt, capture_output=True, text=True, cwd=STATE)
    finally:
        argfile.unlink(missing_ok=True)
    if result.returncode != 0:
        raise StackError(f"formatting Kafka storage failed:\n{result.stdout}{result.stderr}")
