"""docker-compose.yaml is secure by default, checked without a Docker engine: every secret is a
required variable (`${VAR:?...}`) with no default anywhere, every published port is bound to
127.0.0.1, the query API asks for a token (and Prometheus sends it), Cassandra runs
PasswordAuthenticator (the compose entrypoint's script is run here on cassandra.yaml files of
both shapes) and the application logs in with the required password (the cassandra-init script
is run here against a fake cqlsh), and every Spark process runs spark.authenticate with one
required secret.

STATESTORE_COMPOSE_FILE names another compose file to check (e.g. an older revision)."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[3]
COMPOSE = Path(os.environ.get("STATESTORE_COMPOSE_FILE") or PROJECT / "docker-compose.yaml")
ENV_EXAMPLE = PROJECT / ".env.example"

# A variable or environment key that holds a secret.
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|(^|_)KEY($|_)|CREDENTIAL", re.IGNORECASE)
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}, ... ($$ escapes).
REFERENCE = re.compile(r"(?<!\$)\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}")
REQUIRED = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*):\?[^}]+\}$")
# The secrets the deployment needs (issue 29): each a required variable.
SECRETS = {
    "_AIRFLOW_WWW_USER_PASSWORD",
    "POSTGRES_PASSWORD",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "CASSANDRA_ADMIN_PASSWORD",
    "CASSANDRA_PASSWORD",
    "SPARK_AUTH_SECRET",
    "STATESTORE_API_TOKEN",
}
# Defaults that were, or are well known as, passwords.
KNOWN_DEFAULTS = ("change-me", "changeme", "airflow:airflow@", "cassandra:cassandra@", "admin:admin@")


@pytest.fixture(scope="module")
def text() -> str:
    return COMPOSE.read_text()


@pytest.fixture(scope="module")
def services(text) -> dict:
    return yaml.safe_load(text)["services"]


def _strings(node) -> list[str]:
    """Every value of a parsed YAML document: what compose interpolates (comments it does not)."""
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [] if node is None else [str(node)]


@pytest.fixture(scope="module")
def values(text) -> str:
    return "\n".join(_strings(yaml.safe_load(text)))


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _java_options(raw: str) -> dict[str, str]:
    """-Dname=value options, split as after interpolation (a reference's message may hold spaces)."""
    refs = [m[0] for m in REFERENCE.finditer(raw)]
    for i, ref in enumerate(refs):
        raw = raw.replace(ref, f"@REF{i}@", 1)
    options = dict(o[2:].split("=", 1) for o in shlex.split(raw) if o.startswith("-D") and "=" in o)
    return {k: re.sub(r"@REF(\d+)@", lambda m: refs[int(m[1])], v) for k, v in options.items()}


def _mounts(service: dict) -> dict[str, Path]:
    """container path -> the project file a service bind-mounts there."""
    found = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            source, target = volume.get("source", ""), volume.get("target", "")
        else:
            source, target = ([*volume.split(":"), ""])[:2]
        if source.startswith("./"):
            found[target] = PROJECT / source
    return found


def _entrypoint_script(service: dict) -> Path | None:
    """The project script a service's entrypoint runs (`bash /mounted/path`), if any."""
    entrypoint = service.get("entrypoint") or []
    entrypoint = shlex.split(entrypoint) if isinstance(entrypoint, str) else entrypoint
    mounts = _mounts(service)
    return next((mounts[arg] for arg in entrypoint if arg in mounts), None)


# ---------------------------------------------------------------- secrets


def test_every_secret_is_a_required_variable(values, services):
    references = list(REFERENCE.finditer(values))
    secret_refs = [m for m in references if SECRET_NAME.search(m["name"])]
    assert SECRETS <= {m["name"] for m in secret_refs}, f"missing: {SECRETS - {m['name'] for m in secret_refs}}"
    for m in secret_refs:
        assert m["op"] == ":?" and m["arg"].strip(), f"{m[0]}: a secret must be ${{{m['name']}:?message}}"
    # And every secret-looking setting of every service is one of them, never a literal.
    for name, service in services.items():
        for key, value in _environment(service).items():
            if SECRET_NAME.search(key) and not key.endswith(("_FILE", "_PATH")):  # those name files
                assert REQUIRED.match(value), f"{name}: {key}={value!r} is not a required variable"


def test_no_default_password_anywhere(text, values):
    for m in REFERENCE.finditer(values):
        if SECRET_NAME.search(m["name"]):
            assert m["op"] not in ("-", ":-", "+", ":+"), f"{m[0]} gives a secret a default"
    for known in KNOWN_DEFAULTS:
        assert known not in text.lower(), f"{known!r} in {COMPOSE.name}"
    # user:password@ in URLs: the password part is a required variable.
    for user, password in re.findall(r"://([^:/@\s]+):([^@\s]+)@", values):
        assert REQUIRED.match(password), f"{user}:{password}@ has a literal password"


def test_the_env_example_lists_every_variable_with_the_secrets_empty(values):
    assert ENV_EXAMPLE.is_file(), ".env.example documents the variables"
    lines = [line for line in ENV_EXAMPLE.read_text().splitlines() if line and not line.startswith("#")]
    example = dict(line.split("=", 1) for line in lines)
    used = {m["name"] for m in REFERENCE.finditer(values)}
    missing, extra = used - set(example), set(example) - used
    assert not missing and not extra, f"only in {COMPOSE.name}: {missing}; only in .env.example: {extra}"
    for name in used:
        if SECRET_NAME.search(name):
            assert example[name] == "", f".env.example: {name} must be an empty placeholder, not a value"
    body = ENV_EXAMPLE.read_text()
    assert "openssl rand -hex 32" in body and "openssl rand -base64 32 | tr '+/' '-_'" in body  # how to make them


# ---------------------------------------------------------------- ports


def test_every_published_port_is_bound_to_loopback(services):
    published = 0
    for name, service in services.items():
        for port in service.get("ports", []):
            published += 1
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: {port} is not bound to 127.0.0.1"
            else:
                assert str(port).startswith("127.0.0.1:") and str(port).count(":") == 2, (
                    f"{name}: {port!r} is published on every interface; use 127.0.0.1:HOST:CONTAINER"
                )
    assert published >= 7  # Airflow, Cassandra, Kafka, Spark (2), the query API, Prometheus


# ---------------------------------------------------------------- Cassandra

CASSANDRA_5_YAML = """\
cluster_name: 'Test Cluster'
num_tokens: 16
# Authentication backend, implementing IAuthenticator; used to identify users
authenticator:
  class_name : org.apache.cassandra.auth.AllowAllAuthenticator
# MutualTlsAuthenticator can be configured using the following configuration.
#  class_name : org.apache.cassandra.auth.MutualTlsAuthenticator
#  parameters :
#    validator_class_name: org.apache.cassandra.auth.SpiffeCertificateValidator

authorizer:
  class_name: AllowAllAuthorizer

role_manager:
  class_name: CassandraRoleManager
  parameters:
    # invalid_role_disconnect_task_period: 4h

    # invalid_role_disconnect_task_max_jitter: 1h
network_authorizer:
  class_name: AllowAllNetworkAuthorizer
roles_validity: 2000ms
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:7000"
"""
CASSANDRA_4_YAML = """\
cluster_name: 'Test Cluster'
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
network_authorizer: AllowAllNetworkAuthorizer
roles_validity: 2000ms
"""
# What neither file says: Cassandra's own default.
AUTH_DEFAULTS = {"authenticator": "AllowAllAuthenticator", "authorizer": "AllowAllAuthorizer"}


def _run_cassandra_entrypoint(service: dict, conf: str, tmp_path: Path) -> tuple[dict, str]:
    """The cassandra.yaml the service's container starts with (its entrypoint script run on
    `conf`, the image's own entrypoint faked) and the command that entrypoint was handed."""
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "cassandra.yaml").write_text(conf)
    fake = tmp_path / "bin" / "docker-entrypoint.sh"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text('#!/usr/bin/env bash\necho "image entrypoint: $*"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    script = _entrypoint_script(service)
    ran = ""
    if script is not None:
        command = service.get("command") or []
        env = {**os.environ, "CASSANDRA_CONF": str(tmp_path / "conf"), "PATH": f"{fake.parent}:{os.environ['PATH']}"}
        result = subprocess.run(["bash", str(script), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        ran = result.stdout
    return yaml.safe_load((tmp_path / "conf" / "cassandra.yaml").read_text()), ran


@pytest.mark.parametrize("conf", [CASSANDRA_5_YAML, CASSANDRA_4_YAML], ids=["cassandra-5.0-block", "cassandra-4-plain"])
def test_cassandra_runs_password_authenticator(services, conf, tmp_path):
    cassandra = services["cassandra"]
    effective, ran = _run_cassandra_entrypoint(cassandra, conf, tmp_path)

    def setting(key: str) -> str:
        value = effective.get(key, AUTH_DEFAULTS.get(key))
        return value["class_name"].strip().rsplit(".", 1)[-1] if isinstance(value, dict) else value

    assert setting("authenticator") == "PasswordAuthenticator"
    assert setting("authorizer") == "CassandraAuthorizer"
    assert setting("role_manager") == "CassandraRoleManager"
    # Everything else as it was; the image's entrypoint then runs the image's command.
    before = yaml.safe_load(conf)
    assert {k: v for k, v in effective.items() if k not in AUTH_DEFAULTS and k != "role_manager"} == {
        k: v for k, v in before.items() if k not in AUTH_DEFAULTS and k != "role_manager"
    }
    assert "image entrypoint: cassandra -f" in ran
    # At every container start: a second run changes nothing.
    again, _ = _run_cassandra_entrypoint(cassandra, (tmp_path / "conf" / "cassandra.yaml").read_text(), tmp_path)
    assert again == effective


def test_the_cassandra_health_check_needs_no_login(services):
    # With PasswordAuthenticator an anonymous `cqlsh -e ...` fails: the node would never be healthy.
    check = " ".join(map(str, services["cassandra"]["healthcheck"]["test"]))
    assert "cqlsh" not in check or " -u " in check
    assert "/dev/tcp/127.0.0.1/9042" in check


def _fake_cqlsh(tmp_path: Path) -> tuple[Path, Path]:
    """A cqlsh that keeps roles in a JSON file: logins checked against it, the few statements
    create-roles.sh sends applied to it, each call's argv and statements logged."""
    state, log = tmp_path / "roles.json", tmp_path / "calls.jsonl"
    state.write_text(json.dumps({"roles": {"cassandra": {"password": "cassandra", "login": True, "super": True}}}))
    fake = tmp_path / "cqlsh"
    fake.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(f"""\
        import configparser, json, re, sys
        STATE, LOG = {str(state)!r}, {str(log)!r}
        argv = sys.argv[1:]
        creds = configparser.RawConfigParser()
        creds.read(argv[argv.index("--credentials") + 1])
        user, password = creds["plain_text_auth"]["username"], creds["plain_text_auth"]["password"]
        stdin = sys.stdin.read()
        with open(LOG, "a") as f:
            f.write(json.dumps({{"argv": argv, "user": user, "stdin": stdin}}) + "\\n")
        db = json.load(open(STATE))
        role = db["roles"].get(user)
        if not role or not role["login"] or role["password"] != password:
            print("AuthenticationFailed", file=sys.stderr)
            sys.exit(1)
        lit = lambda s: s.replace("''", "'")
        for stmt in filter(None, (s.strip() for s in re.split(r";\\s*(?:\\n|$)", stdin))):
            m = re.match(r"CREATE ROLE (IF NOT EXISTS )?(\\w+)\\s+WITH\\s+(.*)$", stmt, re.S)
            a = re.match(r"ALTER ROLE (\\w+)\\s+WITH\\s+(.*)$", stmt, re.S)
            if m or a:
                name, opts = (m[2], m[3]) if m else (a[1], a[2])
                if m and name in db["roles"]:
                    if m[1]:
                        continue
                    sys.exit("role exists")
                if a and name not in db["roles"]:
                    sys.exit("no such role")
                r = db["roles"].setdefault(name, {{"password": None, "login": False, "super": False}})
                if p := re.search(r"PASSWORD = '((?:[^']|'')*)'", opts):
                    r["password"] = lit(p[1])
                if s := re.search(r"SUPERUSER = (true|false)", opts):
                    r["super"] = s[1] == "true"
                if g := re.search(r"LOGIN = (true|false)", opts):
                    r["login"] = g[1] == "true"
            elif stmt.startswith("GRANT"):
                db.setdefault("grants", []).append(" ".join(stmt.split()))
            elif "system_auth.roles" in stmt:
                name = lit(re.search(r"role = '((?:[^']|'')*)'", stmt)[1])
                print("(1 rows)" if name in db["roles"] else "(0 rows)")
            elif "system_schema.keyspaces" in stmt:
                print("(0 rows)")
        json.dump(db, open(STATE, "w"))
        """)
    )
    fake.chmod(0o755)
    return fake, state


def test_cassandra_init_makes_the_roles_and_switches_the_default_superuser_off(services, tmp_path):
    init = services.get("cassandra-init")
    assert init is not None, "no service makes Cassandra's roles"
    script = _entrypoint_script(init)
    assert script is not None and script.is_file(), "cassandra-init does not run a project script"
    assert init["depends_on"]["cassandra"] == {"condition": "service_healthy"}
    env = _environment(init)
    assert REQUIRED.match(env["CASSANDRA_ADMIN_PASSWORD"]) and REQUIRED.match(env["CASSANDRA_PASSWORD"])

    cqlsh, state = _fake_cqlsh(tmp_path)
    passwords = {"CASSANDRA_ADMIN_PASSWORD": "adm'n pw", "CASSANDRA_PASSWORD": 'app"pw%1'}
    run_env = {
        **os.environ,
        **{k: v for k, v in env.items() if not v.startswith("${")},
        "CASSANDRA_ADMIN_USERNAME": "statestore_admin",
        "CASSANDRA_USERNAME": "statestore",
        **passwords,
        "CQLSH": str(cqlsh),
        "CASSANDRA_INIT_TIMEOUT": "20",
    }
    for _ in range(2):  # at every `up`: the second run changes nothing
        result = subprocess.run(["bash", str(script)], env=run_env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    roles = json.loads(state.read_text())["roles"]
    assert roles["cassandra"]["login"] is False and roles["cassandra"]["super"] is False
    assert roles["cassandra"]["password"] != "cassandra"
    assert roles["statestore_admin"] == {"password": "adm'n pw", "login": True, "super": True}
    assert roles["statestore"] == {"password": 'app"pw%1', "login": True, "super": False}
    grants = json.loads(state.read_text())["grants"]
    assert "GRANT CREATE ON ALL KEYSPACES TO statestore" in grants
    # The passwords never on a command line.
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    for call in calls:
        for secret in passwords.values():
            assert all(secret not in arg for arg in call["argv"]), call["argv"]


def test_cassandra_clients_log_in_with_the_required_password(services):
    init_env = _environment(services["cassandra-init"]) if "cassandra-init" in services else {}
    password = init_env.get("CASSANDRA_PASSWORD", "<no cassandra-init>")
    user = init_env.get("CASSANDRA_USERNAME", "<no cassandra-init>")
    for name in ("statestore-api", "airflow-init"):
        env = _environment(services[name])
        assert env.get("STATESTORE_CASSANDRA_PASSWORD") == password and REQUIRED.match(password), name
        assert env.get("STATESTORE_CASSANDRA_USERNAME") == user, name
        assert services[name]["depends_on"].get("cassandra-init") == {"condition": "service_completed_successfully"}
    # The DAGs' connection gets that login (the hook reads only the connection).
    script = "\n".join(services["airflow-init"]["command"])
    assert 'conn.login = os.environ["STATESTORE_CASSANDRA_USERNAME"]' in script
    assert 'conn.password = os.environ["STATESTORE_CASSANDRA_PASSWORD"]' in script


# ---------------------------------------------------------------- Spark


def _spark_options(services) -> dict[str, dict[str, str]]:
    """service -> the spark.* JVM options of its Spark process (master, worker, driver)."""
    wanted = {}
    for name, service in services.items():
        command = service.get("command") or []
        if command and command[0] == "spark-class":
            role = command[1].rsplit(".", 1)[-1]
            wanted[name] = {"Master": "SPARK_MASTER_OPTS", "Worker": "SPARK_WORKER_OPTS"}[role]
    # The submitting side: the scheduler runs the tasks, so spark-submit and the driver (client mode).
    wanted["airflow-scheduler"] = "SPARK_SUBMIT_OPTS"
    return {name: _java_options(_environment(services[name]).get(var, "")) for name, var in wanted.items()}


def test_spark_authenticate_is_on_for_every_spark_service(services):
    options = _spark_options(services)
    assert {"spark-master", "spark-worker", "airflow-scheduler"} <= set(options)
    secrets = set()
    for name, opts in options.items():
        assert opts.get("spark.authenticate") == "true", f"{name}: spark.authenticate is not on"
        secret = opts.get("spark.authenticate.secret", "")
        assert REQUIRED.match(secret), f"{name}: spark.authenticate.secret {secret!r} is not a required variable"
        secrets.add(secret)
    assert len(secrets) == 1 and REQUIRED.match(secrets.pop())["name"] == "SPARK_AUTH_SECRET"


# ---------------------------------------------------------------- the query API


def _interpolated(env: dict[str, str], value: str = "0123456789abcdef0123456789abcdef") -> dict[str, str]:
    """The service's environment as compose hands it over, every ${VAR...} given `value`."""
    return {k: REFERENCE.sub(value, v) for k, v in env.items()}


def test_the_query_api_beyond_loopback_asks_for_a_token_and_says_insecure_in_words(text, services):
    """statestore-api listens on every interface of its container: `statestore serve` starts
    there only with TLS and a token, or with --insecure, so the compose file gives it a required
    token and, having no TLS inside the compose network, says --insecure with its reason."""
    from statestore.cli.main import build_parser
    from statestore.core import config as cfg
    from statestore.http.access import check_exposure, is_loopback
    from statestore.http.serving import ServeConfig

    api = services["statestore-api"]
    command = [str(a) for a in api["command"]]
    assert command[:4] == ["python", "-m", "statestore", "serve"]
    args = build_parser().parse_args(command[3:])
    env = _environment(api)
    serve = cfg.from_args(ServeConfig, args, _interpolated(env))
    assert not is_loopback(serve.http_host)
    assert REQUIRED.match(env.get("STATESTORE_HTTP_TOKEN", "")), "the API's token is not a required variable"
    assert serve.token is not None
    # What the command itself decides at start: refused without --insecure; with it, said on purpose.
    warning = check_exposure(serve.http_host, serve.http_port, tls=serve.tls, token=True, insecure=serve.insecure)
    if warning is not None:
        comment = text[: text.index("  statestore-api:")].rsplit("\n\n", 1)[-1]
        assert "--insecure" in comment and "TLS" in comment, "--insecure without a comment saying why"
    # The health check needs no token; the rest does.
    assert serve.open_paths == ("/health",)
    assert "/health" in " ".join(map(str, api["healthcheck"]["test"]))


def test_prometheus_scrapes_the_api_with_its_token(services):
    """Prometheus reads the token from a compose secret made from the same variable as the API's."""
    config = yaml.safe_load((PROJECT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    scrape = config["scrape_configs"][0]
    assert scrape["authorization"]["type"] == "Bearer"
    path = scrape["authorization"]["credentials_file"]
    secret = path.removeprefix("/run/secrets/")
    assert path.startswith("/run/secrets/") and secret in services["prometheus"]["secrets"]
    source = yaml.safe_load(COMPOSE.read_text())["secrets"][secret]["environment"]
    token = REQUIRED.match(_environment(services["statestore-api"])["STATESTORE_HTTP_TOKEN"])["name"]
    assert source == token
