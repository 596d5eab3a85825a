"""Cassandra connections: one driver Cluster per process and config, with execution profiles.

Three profiles: the default one for reads and writes of entries (DML); `bookkeeping` for the
stream's registry progress and lease (its writes, lightweight transactions and the reads a
writer decides on at the serial consistency); and `ddl` for schema steps and admin changes.
DML never runs with the DDL profile (ALL by default: one replica down would stop the stream).
The policy is token-aware, so a point read or a single-partition write goes straight to a
replica.

Consistency across data centers (level_for, one rule for the three levels a writer decides
on). "auto", the default of each, is QUORUM for entries and bookkeeping and SERIAL for
transactions. A writer's reads and writes hold only if they overlap every other writer's,
whichever data center either runs in: a LOCAL_ level is decided by the coordinator's data
center alone, and replication to the others is asynchronous, so for a keyspace replicated to
two data centers two lease holders, one in each, can both win (LOCAL_SERIAL), and a writer
restarted in the other data center reads entries and registry marks older than the batches
recorded (LOCAL_QUORUM), then counts on from them without an error. For a keyspace in one data
center QUORUM and SERIAL take the very same replicas as LOCAL_QUORUM and LOCAL_SERIAL (no cost
there), so "auto" needs no per-keyspace lookup that a code path (an executor) could miss. An
explicit LOCAL_ level is refused for a keyspace that spans several data centers
(check_writer_scope: before a stream writes anything, when a writer takes a store's lease, and
before the expire job deletes); readers (`get`, `dump`, `serve`) take no lease and may read at
a local level.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
import weakref
from dataclasses import dataclass

from cassandra import AuthenticationFailed, ConsistencyLevel, InvalidRequest, WriteTimeout, WriteType
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable, Session
from cassandra.connection import ConnectionShutdown
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy
from cassandra.protocol import ErrorMessage

from statestore.core.config import CassandraConfig
from statestore.core.errors import CassandraUnavailableError, ConfigError, KeyspaceMissingError
from statestore.core.model import Replication
from statestore.core.names import validate_keyspace

DDL_PROFILE = "ddl"
BOOKKEEPING_PROFILE = "bookkeeping"

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_sessions: dict[CassandraConfig, tuple[Cluster, Session]] = {}


def _profile(config: CassandraConfig, consistency: str) -> ExecutionProfile:
    return ExecutionProfile(
        # Replicas in random order: a retry after a timeout goes to another replica (2 of 3 with
        # RF 3), not again to the first one, which may be cut off and not yet seen down.
        load_balancing_policy=TokenAwarePolicy(
            DCAwareRoundRobinPolicy(local_dc=config.local_dc), shuffle_replicas=True
        ),
        consistency_level=ConsistencyLevel.name_to_value[consistency],
        serial_consistency_level=ConsistencyLevel.name_to_value[configured_level("serial", config.serial_consistency)],
        request_timeout=config.request_timeout_s,
    )


def configured_level(kind: str, setting: str) -> str:
    """The level a session runs `kind` ("entries", "bookkeeping" or "serial") at for a setting:
    "auto" is QUORUM (SERIAL for transactions), see the module doc."""
    level = setting.strip().upper()
    return _SCOPES[kind].auto if level == "AUTO" else level


@dataclass(frozen=True)
class _Scope:
    """What a level setting governs, for level_for's refusal."""

    auto: str  # what "auto" is
    name: str  # the setting, as its message names it
    flag: str  # its flag / environment variable
    stake: str  # what a LOCAL_ level would let happen on a keyspace in several data centers
    way_out: str


_SCOPES = {
    "entries": _Scope(
        "QUORUM",
        "DML consistency (entries)",
        "--dml-consistency / STATESTORE_DML_CONSISTENCY",
        "each batch reads a key's entry and writes old + delta, and a write acknowledged by one data center "
        "reaches the others later, so a writer restarted in another data center would read entries older "
        "than the batches the store records and count on from them, without an error",
        "QUORUM, EACH_QUORUM or ALL",
    ),
    "bookkeeping": _Scope(
        "QUORUM",
        "bookkeeping consistency (registry, lease, stream log)",
        "--bookkeeping-consistency / STATESTORE_BOOKKEEPING_CONSISTENCY",
        "a writer restarted in another data center would read registry marks (outside writes, TTL expiry) and "
        "stream-log totals older than the ones written here, and its apply cache could trust entries changed "
        "meanwhile",
        "QUORUM, EACH_QUORUM or ALL",
    ),
    "serial": _Scope(
        "SERIAL",
        "serial consistency",
        "--serial-consistency / STATESTORE_SERIAL_CONSISTENCY",
        "a lease, epoch or progress transaction would then be decided by one data center's replicas alone, "
        "and writers in two data centers could both take the store",
        "SERIAL",
    ),
}


@dataclass(frozen=True)
class WriterLevels:
    """The levels a writer of a keyspace runs at (level_for each)."""

    entries: str
    bookkeeping: str
    serial: str


def data_centers_of(replication: dict[str, str], cluster_dcs: set[str] | frozenset[str]) -> set[str]:
    """The data centers holding replicas of a keyspace with `replication` (system_schema's map):
    NetworkTopologyStrategy's data centers with a factor above 0; for any other strategy
    (SimpleStrategy places replicas around the ring whatever their data center) every data
    center of the cluster."""
    strategy = replication.get("class", "").rsplit(".", 1)[-1]
    if strategy != "NetworkTopologyStrategy":
        return set(cluster_dcs)
    return {dc for dc, factor in replication.items() if dc not in ("class", "replication_factor") and int(factor) > 0}


def level_for(kind: str, setting: str, keyspace: str, data_centers: set[str]) -> str:
    """The level a writer of `keyspace`, whose replicas are in `data_centers`, runs `kind`
    ("entries", "bookkeeping" or "serial") at for `setting`: "auto" is QUORUM (SERIAL); a LOCAL_
    level only for a keyspace in at most one data center (ConfigError otherwise, naming the
    way out: see the module doc)."""
    level = configured_level(kind, setting)
    if level.startswith("LOCAL_") and len(data_centers) > 1:
        scope = _SCOPES[kind]
        raise ConfigError(
            f"keyspace '{keyspace}' is replicated to {len(data_centers)} data centers "
            f"({', '.join(sorted(data_centers))}), but the {scope.name} is {level}: {scope.stake}. "
            f"Use {scope.way_out}, or auto (the default: {scope.auto}): unset {scope.flag}"
        )
    return level


def serial_level_for(setting: str, keyspace: str, data_centers: set[str]) -> str:
    """The serial consistency that fences writers of `keyspace` (level_for "serial")."""
    return level_for("serial", setting, keyspace, data_centers)


def keyspace_data_centers(session: Session, keyspace: str) -> set[str] | None:
    """The data centers holding replicas of `keyspace` (data_centers_of its replication), or
    None when there is no such keyspace."""
    row = session.execute(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (validate_keyspace(keyspace),)
    ).one()
    if row is None:
        return None
    cluster_dcs = {host.datacenter for host in session.cluster.metadata.all_hosts() if host.datacenter}
    return data_centers_of(dict(row.replication), cluster_dcs)


def check_writer_scope(session: Session, keyspace: str) -> WriterLevels:
    """The levels `session` writes `keyspace` at (its default profile: entries; its bookkeeping
    profile: registry and lease, and their serial consistency), checked against the data centers
    the keyspace spans: ConfigError for a LOCAL_ level on several (level_for). Called by every
    writer before it writes (the module doc)."""
    profiles = session.cluster.profile_manager.profiles
    bookkeeping = profiles[bookkeeping_profile(session)]
    names = ConsistencyLevel.value_to_name
    serial = bookkeeping.serial_consistency_level
    levels = WriterLevels(
        entries=names[profiles[EXEC_PROFILE_DEFAULT].consistency_level],
        bookkeeping=names[bookkeeping.consistency_level],
        serial="SERIAL" if serial is None else names[serial],
    )
    data_centers = keyspace_data_centers(session, keyspace)
    if data_centers is None:
        return levels
    kinds = ("entries", "bookkeeping", "serial")
    return WriterLevels(*(level_for(kind, getattr(levels, kind), keyspace, data_centers) for kind in kinds))


def bookkeeping_profile(session: Session) -> object:
    """The bookkeeping profile's name; a session made elsewhere (not by session_for) may lack
    it: its default profile then."""
    profiles = session.cluster.profile_manager.profiles
    return BOOKKEEPING_PROFILE if BOOKKEEPING_PROFILE in profiles else EXEC_PROFILE_DEFAULT


def tls_files(config: CassandraConfig) -> list[str]:
    """The TLS files `config` names: the job ships them to the executors (SparkContext.addFile)."""
    if not config.ssl:
        return []
    return [f for f in (config.ssl_ca_file, config.ssl_cert_file, config.ssl_key_file) if f]


def local_copy(path: str | None) -> str | None:
    """`path` if it exists here; else, on an executor, the copy Spark shipped with the job
    (tls_files); else `path` unchanged, so the error names what was configured."""
    if path is None or os.path.exists(path):
        return path
    try:
        from pyspark import SparkFiles

        shipped = SparkFiles.get(os.path.basename(path))
    except Exception:  # noqa: BLE001 - not on a Spark worker, or no files shipped: keep the path
        return path
    return shipped if os.path.exists(shipped) else path


def ssl_context(config: CassandraConfig) -> ssl.SSLContext | None:
    """The TLS context `config` asks for, or None for plain connections."""
    if not config.ssl:
        return None
    try:
        context = ssl.create_default_context(cafile=local_copy(config.ssl_ca_file))
        context.check_hostname = config.ssl_check_hostname
        if not config.ssl_check_hostname:
            context.verify_mode = ssl.CERT_REQUIRED  # still verify the chain
        if config.ssl_cert_file:
            context.load_cert_chain(local_copy(config.ssl_cert_file), local_copy(config.ssl_key_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot set up TLS for Cassandra: {exc}") from None
    return context


_HEARTBEAT_S = 5


def build_cluster(config: CassandraConfig) -> Cluster:
    """A driver Cluster for `config` (no I/O until `connect`)."""
    auth = None
    if config.username is not None:
        auth = PlainTextAuthProvider(config.username, config.password or "")
    return Cluster(
        ssl_context=ssl_context(config),
        contact_points=list(config.hosts),
        port=config.port,
        protocol_version=config.protocol_version,
        auth_provider=auth,
        execution_profiles={
            EXEC_PROFILE_DEFAULT: _profile(config, configured_level("entries", config.dml_consistency)),
            DDL_PROFILE: _profile(config, config.ddl_consistency),
            BOOKKEEPING_PROFILE: _profile(config, configured_level("bookkeeping", config.bookkeeping_consistency)),
        },
        # Retry a lost node every 0.5 s doubling to 10 s (the driver's default goes up to
        # 10 minutes, far too long for a stream waiting out a short outage).
        reconnection_policy=ExponentialReconnectionPolicy(0.5, 10.0),
        # A node cut off the network refuses nothing: its requests just time out. A connection
        # that hears nothing for 5 s is sent a heartbeat, and one unanswered for 5 s more marks
        # the node down, so requests go to the other replicas within about 10 s (the driver's
        # defaults, 30 s and 30 s, outlast a store's 30 s lease).
        idle_heartbeat_interval=_HEARTBEAT_S,
        idle_heartbeat_timeout=_HEARTBEAT_S,
        connect_timeout=config.request_timeout_s,
        control_connection_timeout=config.request_timeout_s,
    )


def connection_error(config: CassandraConfig, exc: NoHostAvailable) -> CassandraUnavailableError:
    """A clear error for a failed connect: authentication, TLS, plaintext to a TLS port, or down.

    Never contains the password.
    """

    where = ", ".join(f"{h}:{config.port}" for h in config.hosts)
    failures, summary = dict(exc.errors or {}), str(exc)
    errors = list(failures.values())

    def reasons(kind: type = BaseException) -> str:
        text = "; ".join(f"{host}: {err}" for host, err in failures.items() if isinstance(err, kind)) or summary
        # The driver never quotes the password, but a server or a later driver might.
        return text.replace(config.password, "<hidden>") if config.password else text

    def tls_failed(err: BaseException) -> bool:
        # The driver re-raises a failed handshake as a plain OSError quoting the SSL error.
        return isinstance(err, ssl.SSLError) or (isinstance(err, OSError) and "[SSL" in str(err))

    if any(isinstance(err, AuthenticationFailed) for err in errors):
        who = f"user '{config.username}'" if config.username is not None else "no user (none was given)"
        message = (
            f"authentication failed for {who} at {where} ({reasons(AuthenticationFailed)}): check "
            "STATESTORE_CASSANDRA_USERNAME / STATESTORE_CASSANDRA_PASSWORD "
            "(--cassandra-username / --cassandra-password), or the file --cassandra-password-file names"
        )
    elif config.ssl and any(tls_failed(err) for err in errors):
        ca = config.ssl_ca_file or "the system CAs (no --cassandra-ssl-ca given)"
        message = (
            f"TLS with Cassandra at {where} failed ({reasons(OSError)}). The server's certificate was "
            f"checked against {ca}: point --cassandra-ssl-ca / STATESTORE_CASSANDRA_SSL_CA at the PEM of "
            "the CA that signed it (the local stack's is .stack/tls/ca.pem). A certificate for another "
            "host name needs that name in STATESTORE_CASSANDRA_HOSTS (or --cassandra-ssl-check-hostname "
            "false); WRONG_VERSION_NUMBER means the server does not speak TLS: drop --cassandra-ssl."
        )
    elif not config.ssl and errors and all(isinstance(e, ConnectionResetError | ConnectionShutdown) for e in errors):
        message = (
            f"Cassandra at {where} closed the connection during the handshake ({reasons()}). A server "
            "that requires TLS does this to plaintext clients: set STATESTORE_CASSANDRA_SSL=true "
            "(--cassandra-ssl) and point STATESTORE_CASSANDRA_SSL_CA (--cassandra-ssl-ca) at the PEM of "
            "its CA (the local stack's is .stack/tls/ca.pem)."
        )
    else:
        message = (
            f"cannot reach Cassandra at {where} ({reasons()}). Is it running? "
            "For the local stack run `make stack-up`; otherwise set "
            "STATESTORE_CASSANDRA_HOSTS / STATESTORE_CASSANDRA_PORT."
        )
    return CassandraUnavailableError(message)


def session_for(config: CassandraConfig) -> Session:
    """The process-wide session for `config`, connected on first use.

    Spark reuses its Python workers, so an executor pays for the connection once, not per
    task or batch.
    """
    with _lock:
        cached = _sessions.get(config)
        if cached is not None and not cached[0].is_shutdown:
            return cached[1]
        cluster = build_cluster(config)
        try:
            session = cluster.connect()
        except NoHostAvailable as exc:
            cluster.shutdown()
            raise connection_error(config, exc) from None
        _sessions[config] = (cluster, session)
        return session


def hosts_down(config: CassandraConfig) -> list[str] | None:
    """The nodes this process's session for `config` sees down, or None without a session."""
    with _lock:
        cached = _sessions.get(config)
    if cached is None or cached[0].is_shutdown:
        return None
    return sorted(str(host.endpoint) for host in cached[0].metadata.all_hosts() if not host.is_up)


def close_all() -> None:
    with _lock:
        for cluster, _ in _sessions.values():
            cluster.shutdown()
        _sessions.clear()


def require_keyspace(session: Session, keyspace: str) -> None:
    validate_keyspace(keyspace)
    row = session.execute(
        "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)
    ).one()
    if row is None:
        raise KeyspaceMissingError(
            f"keyspace '{keyspace}' does not exist. Create it with "
            f"`statestore create-keyspace {keyspace}` (or with your own replication settings)."
        )


def create_keyspace(session: Session, keyspace: str, replication: int | Replication = 1) -> None:
    """CREATE KEYSPACE IF NOT EXISTS with `replication` (a factor: SimpleStrategy)."""
    validate_keyspace(keyspace)
    if not isinstance(replication, Replication):
        replication = Replication(replication_factor=replication)
    session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication.cql()}",
        execution_profile=DDL_PROFILE,
    )


# Protocol v5's CAS_WRITE_UNKNOWN: a Paxos round ended with its proposal accepted by fewer than
# a quorum. The driver (3.30) has no class for it and raises its bare ErrorMessage.
CAS_WRITE_UNKNOWN = 0x1700
_SERIAL_READ_ATTEMPTS = 4


def cas_outcome_unknown(exc: BaseException) -> bool:
    """Whether `exc` says a lightweight transaction (or a serial read's Paxos round) ended
    without knowing whether its proposal was committed: contention or a slow replica, worth
    another round."""
    if isinstance(exc, ErrorMessage) and getattr(exc, "code", None) == CAS_WRITE_UNKNOWN:
        return True
    return isinstance(exc, WriteTimeout) and getattr(exc, "write_type", None) == WriteType.CAS


def serial_read(session: Session, statement, params: tuple):
    """Run a prepared read at the bookkeeping profile's serial consistency: it sees every
    lightweight transaction committed before it (and completes one left half-done), which a
    plain read at a quorum may not. For the reads a writer decides on (lease, epoch, progress).

    A serial read runs a Paxos round of its own, so under contention with a writer's
    transactions it can end "result unknown" (CAS_WRITE_UNKNOWN or a CAS write timeout). The
    read changes nothing a caller can see, so it is simply run again (a few times, briefly)."""
    profiles = session.cluster.profile_manager.profiles
    name = bookkeeping_profile(session)
    bound = statement.bind(params)
    bound.consistency_level = profiles[name].serial_consistency_level or ConsistencyLevel.SERIAL
    for attempt in range(1, _SERIAL_READ_ATTEMPTS + 1):
        try:
            return session.execute(bound, execution_profile=name)
        except Exception as exc:  # only a Paxos outcome left unknown is retried; anything else propagates
            if attempt == _SERIAL_READ_ATTEMPTS or not cas_outcome_unknown(exc):
                raise
            _log.info("serial read: Paxos outcome unknown (%s), reading again", exc)
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


# Each session's prepared statements, held for as long as the session lives: keyed by the
# session itself, not its id(), which a later session could reuse after this one is gone (it
# would then be handed statements prepared on a closed cluster).
_prepared: weakref.WeakKeyDictionary[Session, dict[str, object]] = weakref.WeakKeyDictionary()
_prepared_lock = threading.Lock()


def prepare(session: Session, cql: str):
    """Prepare `cql` once per session; prepared statements are idempotent-marked by their
    callers, never here."""
    statements = _prepared.get(session)
    if statements is None:
        with _prepared_lock:
            statements = _prepared.setdefault(session, {})
    statement = statements.get(cql)
    if statement is None:
        statement = session.prepare(cql)
        statements[cql] = statement
    return statement


def table_metadata(session: Session, keyspace: str, table: str):
    """The driver's schema metadata of `keyspace.table`, or None when the driver knows no such table."""
    meta = session.cluster.metadata.keyspaces.get(validate_keyspace(keyspace))
    return None if meta is None else meta.tables.get(table)


def table_ttl_s(session: Session, keyspace: str, table: str) -> int | None:
    """The table's default time to live in seconds (0: none), read from the schema tables now
    (the driver's metadata can lag an ALTER by a moment); None when there is no such table."""
    row = _table_ttl_row(session, keyspace, table)
    return None if row is None else int(row.default_time_to_live)


def _table_ttl_row(session: Session, keyspace: str, table: str):
    """The table's schema row as the contacted node holds it: its default TTL and when its
    parameters last changed (the write time every ALTER of the table gives the whole row)."""
    return session.execute(
        "SELECT default_time_to_live, WRITETIME(default_time_to_live) AS changed_us"
        " FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (validate_keyspace(keyspace), table),
    ).one()


@dataclass(frozen=True)
class TableTtl:
    """A table's default time to live (`ttl_s`: 0 none, None no such table) and its schema mark
    (`schema_mark`): two reads with the same mark saw no change of the table in between, a TTL
    set and removed again included (schema_mark)."""

    ttl_s: int | None
    schema_mark: frozenset[str] = frozenset()


def schema_mark(changed_us: int | None, versions: frozenset[str]) -> frozenset[str]:
    """Pure: what a plan compares with the previous plan's to know the table did not change
    between them. `changed_us` is when the contacted node last changed the table (None: no such
    table), which any ALTER of it moves on, and only an ALTER of it: a schema change elsewhere in
    the cluster (another table created or altered) leaves it as it was. `versions` are the
    cluster's schema versions (the contacted node's and its peers' through gossip): while they
    disagree, a change some node made may not have reached the contacted one yet, so they join
    the mark, which then differs from any mark of a cluster in agreement."""
    mark = {f"table changed at {changed_us}"}
    return frozenset(mark | versions if len(versions) > 1 else mark)


def table_ttl_with_schema(session: Session, keyspace: str, table: str) -> TableTtl:
    """The table's default TTL (table_ttl_s) and its schema mark (schema_mark), the cluster's
    schema versions read first: a change that reaches the contacted node after they were read
    shows in the table's row."""
    local = session.execute("SELECT schema_version FROM system.local").one()
    peers = session.execute("SELECT schema_version FROM system.peers")
    found = [local.schema_version if local is not None else None, *(row.schema_version for row in peers)]
    versions = frozenset(str(version) for version in found if version is not None)
    row = _table_ttl_row(session, keyspace, table)
    if row is None:
        return TableTtl(None, schema_mark(None, versions))
    return TableTtl(int(row.default_time_to_live), schema_mark(row.changed_us, versions))


def add_missing_columns(
    session: Session, keyspace: str, table: str, columns: tuple[tuple[str, str], ...], ddl_profile: object = DDL_PROFILE
) -> tuple[str, ...]:
    """Add the (name, CQL type) columns an existing `keyspace.table`, made by an older release,
    lacks (idempotent; a column another worker added first is fine); returns those this call
    added, as table.column."""
    found = table_metadata(session, keyspace, table)
    added = []
    for column, kind in columns:
        if found is None or column in found.columns:
            continue
        try:
            session.execute(
                f"ALTER TABLE {validate_keyspace(keyspace)}.{table} ADD {column} {kind}", execution_profile=ddl_profile
            )
            added.append(f"{table}.{column}")
        except InvalidRequest as exc:  # another worker added it first
            if "conflicts with an existing column" not in str(exc):
                raise
    return tuple(added)
