"""`statestore serve` as a real process, reached by a real client: over TLS with a throwaway CA,
a missing, a wrong and the right token; a bind beyond loopback refused without TLS and a token
(before anything listens) unless --insecure is said; /health and /metrics open only when asked.

Cassandra is a closed port here: the right token gets past the check to a route that answers 503
(Cassandra unreachable), where a missing or wrong one is answered 401. Reading a real store over
TLS with a token is tests/integration/http/test_serve_security.py."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from statestore.cli.main import main
from statestore.http import serve
from tests.tls_files import make_tls_files

TOKEN = "c0ffee" * 6  # 36 characters
WRONG = "c0ffee" * 5 + "c0ffef"
REALM = 'Bearer realm="statestore"'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """`python -m statestore serve ARGS` on a free port, its output in a log file; ready once
    `/health` answers (with `headers`)."""

    def __init__(self, tmp_path: Path, *args: str, scheme="http", verify=True, headers=None, env=None) -> None:
        self.port = _free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.verify = verify
        self.log = tmp_path / f"serve-{self.port}.log"
        argv = [sys.executable, "-m", "statestore", "serve", "--port", str(self.port), *args]
        # Cassandra on a closed port: nothing here needs it, and a query fails at once (503).
        base = {**os.environ, "STATESTORE_CASSANDRA_PORT": str(_free_port()), "STATESTORE_REQUEST_TIMEOUT": "2"}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, env={**base, **(env or {})}, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"serve exited: {self.log.read_text()}"
            try:
                if self.get("/health", headers=headers).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError(f"serve did not answer within 60 s: {self.log.read_text()}")

    def get(self, path: str, headers=None, verify=None) -> httpx.Response:
        verify = self.verify if verify is None else verify
        return httpx.get(self.url + path, headers=headers, verify=verify, timeout=10)

    def stop(self) -> str:
        """Stop it (SIGTERM) and return its log."""
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.log.read_text()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_over_tls_a_missing_or_wrong_token_is_401_and_the_right_one_gets_through(tmp_path):
    tls = make_tls_files(tmp_path / "tls")
    token_file = tmp_path / "api-token"
    token_file.write_text(TOKEN + "\n")
    trusted = ssl.create_default_context(cafile=str(tls.ca))
    server = Serve(
        tmp_path,
        "--host", "0.0.0.0", "--tls-cert", str(tls.cert), "--tls-key", str(tls.key),
        "--token-file", str(token_file), "--open-health",
        scheme="https",
        verify=trusted,
    )  # fmt: skip
    try:
        assert server.get("/health").json() == {"status": "ok"}  # opened: a load balancer's probe
        for path in ("/stores", "/stores/words/keys/the", "/metrics", "/openapi.json"):
            missing = server.get(path)
            assert missing.status_code == 401 and missing.headers["www-authenticate"] == REALM, path
            wrong = server.get(path, headers=_bearer(WRONG))
            assert wrong.status_code == 401, path
            assert wrong.headers["www-authenticate"] == f'{REALM}, error="invalid_token"'
            right = server.get(path, headers=_bearer(TOKEN))
            assert right.status_code != 401, (path, right.text)
        assert server.get("/stores", headers=_bearer(TOKEN)).status_code == 503  # on to Cassandra (closed here)
        assert server.get("/openapi.json", headers=_bearer(TOKEN)).json()["security"] == [{"bearer": []}]
        # TLS for real: a client that does not trust the CA is refused, and plain HTTP gets no answer.
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            server.get("/health", verify=True)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=5)
    finally:
        log = server.stop()
    assert "serving https (TLS); every request needs the bearer token; open without it: /health" in log
    assert TOKEN not in log and WRONG not in log


@pytest.mark.parametrize(
    "args, env, without",
    [
        ((), {}, "without TLS and a token"),
        ((), {"STATESTORE_HTTP_TOKEN": TOKEN}, "without TLS"),
        (("--tls-cert", "TLS/server.pem", "--tls-key", "TLS/server-key.pem"), {}, "without a token"),
    ],
    ids=["nothing", "token-only", "tls-only"],
)
def test_beyond_loopback_without_tls_and_a_token_nothing_listens(tmp_path, monkeypatch, capsys, args, env, without):
    tls = make_tls_files(tmp_path / "tls")
    args = tuple(a.replace("TLS", str(tls.ca.parent)) for a in args)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    bound = []
    monkeypatch.setattr(serve, "listening_socket", lambda *a, **k: bound.append(a) or pytest.fail("it listened"))
    port = _free_port()
    code = main(["serve", "--host", "0.0.0.0", "--port", str(port), *args])
    err = capsys.readouterr().err
    assert code == 2 and bound == []
    assert f"statestore: refusing to listen on 0.0.0.0:{port} {without}:" in err
    assert "--insecure" in err and TOKEN not in err


def test_insecure_in_so_many_words_serves_beyond_loopback_with_a_warning(tmp_path):
    server = Serve(tmp_path, "--host", "0.0.0.0", "--insecure")
    try:
        assert server.get("/health").status_code == 200
        assert server.get("/stores").status_code == 503  # no token asked: on to Cassandra
    finally:
        log = server.stop()
    assert f"--insecure: listening on 0.0.0.0:{server.port} without TLS and a token" in log
    assert "serving http (no TLS); no token asked" in log


def test_metrics_open_and_health_closed_on_loopback_with_a_token(tmp_path):
    # On loopback a token needs no TLS; STATESTORE_HTTP_TOKEN gives it without a file.
    server = Serve(tmp_path, "--open-metrics", headers=_bearer(TOKEN), env={"STATESTORE_HTTP_TOKEN": TOKEN})
    try:
        assert server.get("/metrics").status_code != 401  # a scraper without credentials
        assert server.get("/health").status_code == 401
        assert server.get("/health", headers=_bearer(TOKEN)).status_code == 200
        assert server.get("/stores").status_code == 401
    finally:
        log = server.stop()
    assert "every request needs the bearer token; open without it: /metrics" in log and TOKEN not in log


def test_a_certificate_that_does_not_load_is_one_clear_error(tmp_path, capsys):
    tls = make_tls_files(tmp_path / "tls")
    other = make_tls_files(tmp_path / "other")
    port = _free_port()
    common = ["serve", "--port", str(port), "--tls-cert", str(tls.cert)]
    assert main([*common, "--tls-key", str(other.key)]) == 2  # another certificate's key
    assert "cannot be loaded as a PEM certificate and its unencrypted key" in capsys.readouterr().err
    assert main([*common, "--tls-key", str(tmp_path / "absent.pem")]) == 2
    assert f"--tls-key {tmp_path / 'absent.pem'}: no such file" in capsys.readouterr().err
