"""How `statestore serve` serves the query API: address, TLS and token, worker processes, read
cache, and the load it admits before it sheds.

A frozen dataclass on the same precedence chain as every other setting (defaults <
STATESTORE_HTTP_* environment < flags), so the worker processes of `--workers N` resolve
exactly what the command line gave the parent (statestore.http.serve hands it over through
the environment).
"""

from __future__ import annotations

from dataclasses import dataclass

from statestore.core.config import read_password_file
from statestore.core.errors import ConfigError
from statestore.core.settings import parse_bool, parse_port, parse_positive_float, parse_positive_int, setting
from statestore.http.access import MAKE_TOKEN, token_problem


def _blank_is_none(raw: str) -> str | None:
    return raw or None


def _count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


@dataclass(frozen=True)
class ServeConfig:
    """HTTP API server."""

    http_host: str = setting("127.0.0.1", "STATESTORE_HTTP_HOST", "--host", "address to listen on (default 127.0.0.1)")
    http_port: int = setting(8080, "STATESTORE_HTTP_PORT", "--port", "TCP port (default 8080)", parse_port)
    workers: int = setting(
        1,
        "STATESTORE_HTTP_WORKERS",
        "--workers",
        "server processes sharing the port (default 1; about one per core the API may use)",
        parse_positive_int,
    )
    cache_entries: int = setting(
        0, "STATESTORE_HTTP_CACHE_ENTRIES", "--cache-entries", "read cache size per worker (default 0: off)", _count
    )
    cache_ttl_s: float = setting(
        1.0,
        "STATESTORE_HTTP_CACHE_TTL",
        "--cache-ttl",
        "how stale a cached read may be, in seconds (default 1)",
        parse_positive_float,
    )
    max_active: int = setting(
        32,
        "STATESTORE_HTTP_MAX_ACTIVE",
        "--max-active",
        "requests a worker serves at once (default 32); more wait in its queue",
        parse_positive_int,
    )
    max_queue: int = setting(
        224,
        "STATESTORE_HTTP_MAX_QUEUE",
        "--max-queue",
        "requests a worker lets wait for a slot (default 224); beyond it, 503 with Retry-After at once",
        _count,
    )
    retry_after_s: int = setting(
        1,
        "STATESTORE_HTTP_RETRY_AFTER",
        "--retry-after",
        "seconds a shed request is told to wait before trying again (default 1)",
        parse_positive_int,
    )
    tls_cert_file: str | None = setting(
        None,
        "STATESTORE_HTTP_TLS_CERT",
        "--tls-cert",
        "PEM certificate (its chain after it) to serve HTTPS with, together with --tls-key (default: plain HTTP)",
        _blank_is_none,
    )
    tls_key_file: str | None = setting(
        None,
        "STATESTORE_HTTP_TLS_KEY",
        "--tls-key",
        "PEM private key of --tls-cert (unencrypted)",
        _blank_is_none,
    )
    # No flag: a command line is readable by every user of the machine (ps, /proc/<pid>/cmdline).
    token: str | None = setting(
        None,
        "STATESTORE_HTTP_TOKEN",
        None,
        "the bearer token every request must carry (Authorization: Bearer TOKEN); environment only, "
        "or in a file named by --token-file (default: none, no token asked)",
        _blank_is_none,
        secret=True,
    )
    # Read once, in __post_init__, into `token` (as CassandraConfig.password_file).
    token_file: str | None = setting(
        None,
        "STATESTORE_HTTP_TOKEN_FILE",
        "--token-file",
        "file whose content, a trailing newline stripped, is the bearer token every request must carry "
        "(e.g. a mounted secret; " + MAKE_TOKEN + "); not together with STATESTORE_HTTP_TOKEN",
        _blank_is_none,
    )
    open_health: bool = setting(
        False,
        "STATESTORE_HTTP_OPEN_HEALTH",
        "--open-health",
        "answer /health without the token (a load balancer's probe; it reads nothing)",
        parse_bool,
        switch=True,
    )
    open_metrics: bool = setting(
        False,
        "STATESTORE_HTTP_OPEN_METRICS",
        "--open-metrics",
        "answer /metrics without the token (a scraper without credentials; it shows the stores' names and figures)",
        parse_bool,
        switch=True,
    )
    insecure: bool = setting(
        False,
        "STATESTORE_HTTP_INSECURE",
        "--insecure",
        "listen beyond loopback (--host 0.0.0.0, ...) without TLS or without a token, which is refused "
        "otherwise: anyone who can reach the port then reads the stores, or sees the token",
        parse_bool,
        switch=True,
    )

    def __post_init__(self) -> None:
        if self.token_file:
            if self.token is not None:
                raise ConfigError(
                    "give the API token once: either in a file (--token-file / STATESTORE_HTTP_TOKEN_FILE) "
                    "or in STATESTORE_HTTP_TOKEN, not both"
                )
            source = f"--token-file / STATESTORE_HTTP_TOKEN_FILE ({self.token_file})"
            object.__setattr__(
                self, "token", read_password_file(self.token_file, "--token-file / STATESTORE_HTTP_TOKEN_FILE", "token")
            )
        else:
            source = "STATESTORE_HTTP_TOKEN"
        object.__setattr__(self, "token_file", None)
        problem = None if self.token is None else token_problem(self.token)
        if problem:
            raise ConfigError(f"the API token of {source} is not usable: {problem}; {MAKE_TOKEN}")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigError(
                "TLS needs both --tls-cert and --tls-key (STATESTORE_HTTP_TLS_CERT / STATESTORE_HTTP_TLS_KEY)"
            )

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    @property
    def open_paths(self) -> tuple[str, ...]:
        """The paths answered without the token."""
        return tuple(p for p, on in (("/health", self.open_health), ("/metrics", self.open_metrics)) if on)
