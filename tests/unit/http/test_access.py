"""Who may read the API: the bind rule (beyond loopback only with TLS and a token, or --insecure),
the token's settings (a file or a variable, never a flag), and the bearer check in the app
(401 with WWW-Authenticate: Bearer; /health and /metrics open only when asked). The real
server over TLS is test_serve_security.py."""

from __future__ import annotations

import argparse
import socket
import warnings

import pytest

with warnings.catch_warnings():  # starlette 1.x asks for `httpx2`; the pinned set has httpx, which works
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from statestore.cli.main import build_parser
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError
from statestore.http import create_app
from statestore.http.access import BearerAuth, bearer_token, check_exposure, is_loopback, token_problem
from statestore.http.serve import security_line, worker_environment
from statestore.http.serving import ServeConfig

TOKEN = "3f1c0b9e8d7a6f5e4d3c2b1a09f8e7d6"
OTHER = "3f1c0b9e8d7a6f5e4d3c2b1a09f8e7d7"  # one character off, same length


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the bind rule


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.0.1.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.0.0.5", False),
        ("192.168.1.2", False),
        ("api.example.com", False),  # a name may resolve anywhere
    ],
)
def test_loopback_is_127_8_and_1_and_localhost_only(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_needs_neither_tls_nor_token(host):
    assert check_exposure(host, 8080, tls=False, token=False, insecure=False) is None


def test_beyond_loopback_with_tls_and_a_token_says_nothing():
    assert check_exposure("0.0.0.0", 8080, tls=True, token=True, insecure=False) is None


@pytest.mark.parametrize(
    "tls, token, names",
    [
        (False, False, ("without TLS and a token", "--tls-cert", "STATESTORE_HTTP_TOKEN", "--token-file")),
        (True, False, ("without a token", "STATESTORE_HTTP_TOKEN", "openssl rand -hex 32")),
        (False, True, ("without TLS", "--tls-cert and --tls-key", "see the token")),
    ],
)
def test_beyond_loopback_without_both_is_refused_with_the_way_out(tls, token, names):
    with pytest.raises(ConfigError) as refused:
        check_exposure("0.0.0.0", 8080, tls=tls, token=token, insecure=False)
    message = str(refused.value)
    assert message.startswith("refusing to listen on 0.0.0.0:8080")
    for name in (*names, "--insecure", "--host 127.0.0.1"):
        assert name in message, name
    if tls:
        assert "--tls-cert" not in message  # only what is missing


@pytest.mark.parametrize("tls, token", [(False, False), (True, False), (False, True)])
def test_insecure_lets_it_through_with_a_warning(tls, token):
    warning = check_exposure("10.0.0.5", 9000, tls=tls, token=token, insecure=True)
    assert warning.startswith("--insecure: listening on 10.0.0.5:9000 without ")


# ---------------------------------------------------------------- the token's settings


def _serve_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, ServeConfig)
    return parser.parse_args(argv)


@pytest.mark.parametrize("argv", [("--token", TOKEN), (f"--token={TOKEN}",), ("--token",)])
def test_the_token_has_no_flag_only_a_variable_or_a_file(capsys, argv):
    # Not even as an abbreviation of --token-file (argparse's default): the token would be read as a path.
    with pytest.raises(SystemExit) as refused:
        _serve_args(*argv)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and TOKEN not in err
    assert "--token is not taken on the command line" in err
    assert "STATESTORE_HTTP_TOKEN" in err and "--token-file" in err
    help_text = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    assert "--token-file" in help_text and "--token " not in help_text
    assert cfg.from_args(ServeConfig, _serve_args(), {"STATESTORE_HTTP_TOKEN": TOKEN}).token == TOKEN


def test_the_token_file_is_read_once_and_handed_to_workers_as_the_token(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    env = {"STATESTORE_HTTP_TOKEN_FILE": str(path)}
    serve = cfg.from_args(ServeConfig, _serve_args("--host", "0.0.0.0"), env)
    assert serve.token == TOKEN and serve.token_file is None
    assert TOKEN not in repr(serve)
    # The parent's environment keeps the file's variable; a worker must not see file and token both.
    handed = worker_environment(env, serve)
    assert "STATESTORE_HTTP_TOKEN_FILE" not in handed
    assert cfg.resolve(ServeConfig, env=handed) == serve


def test_workers_get_a_password_read_from_a_file_without_the_file_variable(tmp_path):
    """The same hand-over for the Cassandra password: with STATESTORE_CASSANDRA_PASSWORD_FILE set,
    `serve --workers 2` handed the workers the password beside it and each refused to start."""
    path = tmp_path / "password"
    path.write_text("s3cret\n")
    env = {"STATESTORE_CASSANDRA_PASSWORD_FILE": str(path), "PATH": "/usr/bin"}
    cassandra = cfg.resolve(CassandraConfig, env=env)
    handed = worker_environment(env, cassandra, ServeConfig())
    assert handed["PATH"] == "/usr/bin"
    assert cfg.resolve(CassandraConfig, env=handed) == cassandra
    assert cfg.resolve(CassandraConfig, env=handed).password == "s3cret"


def test_token_in_file_and_variable_both_is_refused(tmp_path):
    (tmp_path / "token").write_text(TOKEN)
    env = {"STATESTORE_HTTP_TOKEN": TOKEN, "STATESTORE_HTTP_TOKEN_FILE": str(tmp_path / "token")}
    with pytest.raises(ConfigError, match="give the API token once"):
        cfg.resolve(ServeConfig, env=env)


@pytest.mark.parametrize(
    "token, why",
    [("short", "fewer than 16"), ("has spaces in it, twenty chars", "only letters"), ("é" * 20, "only letters")],
)
def test_an_unusable_token_is_refused_without_showing_it(tmp_path, token, why):
    assert why in token_problem(token)
    with pytest.raises(ConfigError) as refused:
        cfg.resolve(ServeConfig, env={"STATESTORE_HTTP_TOKEN": token})
    assert why in str(refused.value) and token not in str(refused.value)
    (tmp_path / "token").write_text(token)
    with pytest.raises(ConfigError, match="--token-file") as refused:
        cfg.resolve(ServeConfig, env={"STATESTORE_HTTP_TOKEN_FILE": str(tmp_path / "token")})
    assert token not in str(refused.value)


def test_an_empty_or_missing_token_file_is_refused(tmp_path):
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match=r"the token file .* is empty"):
        cfg.from_args(ServeConfig, _serve_args("--token-file", str(tmp_path / "empty")), {})
    with pytest.raises(ConfigError, match="cannot read the token file"):
        cfg.from_args(ServeConfig, _serve_args("--token-file", str(tmp_path / "absent")), {})


@pytest.mark.parametrize("flags", [("--tls-cert", "c.pem"), ("--tls-key", "k.pem")])
def test_tls_needs_the_certificate_and_its_key(flags):
    with pytest.raises(ConfigError, match="both --tls-cert and --tls-key"):
        cfg.from_args(ServeConfig, _serve_args(*flags), {})


def test_open_paths_and_the_start_line_never_show_the_token():
    serve = cfg.from_args(ServeConfig, _serve_args("--open-health"), {"STATESTORE_HTTP_TOKEN": TOKEN})
    assert serve.open_paths == ("/health",)
    line = security_line(serve)
    assert TOKEN not in line and "needs the bearer token" in line and "/health" in line
    assert security_line(ServeConfig()) == "serving http (no TLS); no token asked"


# ---------------------------------------------------------------- the check in the app


@pytest.mark.parametrize(
    "headers, token",
    [
        ([], None),
        ([(b"authorization", b"Bearer abc")], b"abc"),
        ([(b"Authorization", b"bearer   abc ")], b"abc"),
        ([(b"authorization", b"Basic YWxhZGRpbjpvcGVuc2VzYW1l")], None),
        ([(b"authorization", b"Bearer")], None),
        ([(b"authorization", b"Bearer abc"), (b"authorization", b"Bearer abc")], None),
    ],
)
def test_bearer_token_of_the_headers(headers, token):
    assert bearer_token(headers) == token


def test_only_health_and_metrics_may_be_opened():
    with pytest.raises(ValueError, match="/stores"):
        BearerAuth(None, TOKEN, open_paths=("/stores",))


@pytest.fixture
def client():
    app = create_app(CassandraConfig(port=_closed_port(), request_timeout_s=2.0), kafka=None, token=TOKEN)
    with TestClient(app) as client:
        yield client


@pytest.mark.parametrize(
    "path", ["/stores", "/stores/words", "/stores/words/keys/the", "/stores/words/entries", "/health", "/metrics"]
)
def test_no_token_or_another_is_401_with_www_authenticate_bearer(client, path):
    missing = client.get(path)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="statestore"'
    assert missing.json()["error"] == "unauthorized" and "Authorization: Bearer" in missing.json()["detail"]
    for header in (f"Bearer {OTHER}", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN):
        wrong = client.get(path, headers={"Authorization": header})
        assert wrong.status_code == 401, header
        assert wrong.headers["www-authenticate"].startswith('Bearer realm="statestore"')
        assert TOKEN not in wrong.text
    assert client.get(path, headers={"Authorization": f"Bearer {OTHER}"}).headers["www-authenticate"] == (
        'Bearer realm="statestore", error="invalid_token"'
    )


def test_the_right_token_reaches_the_routes(client):
    right = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get("/health", headers=right).json() == {"status": "ok"}
    assert client.get("/stores", headers=right).status_code == 503  # on to Cassandra, which is not there
    assert client.get("/stores/words/keys/the", headers=right).status_code == 503  # the point-get fast path
    assert client.get("/stores", headers={"authorization": f"bearer {TOKEN}"}).status_code == 503
    doc = client.get("/openapi.json", headers=right).json()
    assert doc["security"] == [{"bearer": []}] and doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert "401" in doc["paths"]["/stores"]["get"]["responses"]
    assert client.get("/openapi.json").status_code == 401 and client.get("/docs").status_code == 401


@pytest.mark.parametrize("opened", [(), ("/health",), ("/metrics",), ("/health", "/metrics")])
def test_health_and_metrics_are_open_only_when_asked(opened):
    app = create_app(
        CassandraConfig(port=_closed_port(), request_timeout_s=2.0), kafka=None, token=TOKEN, open_paths=opened
    )
    with TestClient(app) as client:
        for path in ("/health", "/metrics"):
            status = client.get(path).status_code
            assert (status != 401) is (path in opened), (path, status)
        assert client.get("/stores").status_code == 401
        assert client.get("/health/").status_code == 401  # the exact path only


def test_mounted_under_a_prefix_the_open_paths_are_the_apps_own():
    from fastapi import FastAPI

    parent = FastAPI()
    parent.mount(
        "/statestore/api",
        create_app(CassandraConfig(port=_closed_port()), kafka=None, token=TOKEN, open_paths=("/health",)),
    )
    with TestClient(parent) as client:
        assert client.get("/statestore/api/health").status_code == 200
        assert client.get("/statestore/api/stores").status_code == 401


def test_without_a_token_nothing_is_asked_and_health_answers():
    with TestClient(create_app(CassandraConfig(port=_closed_port(), request_timeout_s=2.0), kafka=None)) as client:
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/stores").status_code == 503
        assert "security" not in client.get("/openapi.json").json()
