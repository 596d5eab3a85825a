"""`statestore serve`: the query API under uvicorn, in one process or in `workers` processes.

Each worker binds the port itself with SO_REUSEPORT, so the kernel spreads new connections over
the workers evenly (uvicorn's own `--workers` shares one listening socket, and whichever worker
wakes first accepts a whole burst of connections). Each worker has its own event loop, Cassandra
session, read cache and load-shedding limits, so the limits and the cache are per worker.

Workers start as fresh interpreters (multiprocessing's spawn), so the parent hands its resolved
settings to them as STATESTORE_* variables and each resolves them again through the same chain
(command line over environment over defaults). The parent restarts a worker that dies (with a
growing delay while workers keep dying soon after they start) and stops them all on SIGINT or
SIGTERM. Their request metrics are shared through prometheus-client's multiprocess directory,
made for the run and removed after it.

Before anything listens, the bind is checked (statestore.http.access.check_exposure: beyond
loopback only with TLS and a token, or --insecure said) and the certificate and key are loaded
once, so a bad file is one clear error instead of workers dying one after the other.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import wait

import uvicorn
from fastapi import FastAPI

from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import ConfigError
from statestore.http.access import check_exposure
from statestore.http.admission import admission_protocol
from statestore.http.app import create_app
from statestore.http.metrics import MULTIPROCESS_DIR_ENV
from statestore.http.serving import ServeConfig
from statestore.http.shedding import ShedLimits
from statestore.store.cache import CacheOptions

_log = logging.getLogger(__name__)
BIND_FAILED = 3  # a worker's exit code when it could not bind the port


def build_app(serve: ServeConfig, cassandra: CassandraConfig) -> FastAPI:
    cache = CacheOptions(serve.cache_entries, serve.cache_ttl_s) if serve.cache_entries else None
    return create_app(
        cassandra, cache=cache, shedding=shed_limits(serve), token=serve.token, open_paths=serve.open_paths
    )


def shed_limits(serve: ServeConfig) -> ShedLimits:
    return ShedLimits(serve.max_active, serve.max_queue, serve.retry_after_s)


def listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """A bound TCP socket for uvicorn; ConfigError naming the address when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}. Choose another --port (or stop what holds it)."
        ) from None
    sock.set_inheritable(True)
    return sock


def check_tls_files(serve: ServeConfig) -> None:
    """Load the certificate and key as uvicorn will: ConfigError saying which file is wrong and why."""
    if not serve.tls:
        return
    for flag, path in (("--tls-cert", serve.tls_cert_file), ("--tls-key", serve.tls_key_file)):
        if not os.path.isfile(path):
            raise ConfigError(f"{flag} {path}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(serve.tls_cert_file, serve.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"--tls-cert {serve.tls_cert_file} / --tls-key {serve.tls_key_file}: cannot be loaded as a PEM "
            f"certificate and its unencrypted key ({getattr(exc, 'reason', None) or exc})"
        ) from None


def security_line(serve: ServeConfig) -> str:
    """What the log says of the API's protection at start (never the token)."""
    scheme = "https (TLS)" if serve.tls else "http (no TLS)"
    if serve.token is None:
        return f"serving {scheme}; no token asked"
    opened = f"; open without it: {', '.join(serve.open_paths)}" if serve.open_paths else ""
    return f"serving {scheme}; every request needs the bearer token{opened}"


def worker_environment(env: Mapping[str, str], *settings) -> dict[str, str]:
    """`env` with `settings` handed over: their STATESTORE_* variables set, and those of settings
    that resolved to None removed (a *_FILE variable read into its secret would else clash with
    it in the worker: "give the password once")."""
    handed = dict(env)
    for section in settings:
        for f in dataclasses.fields(section):
            if getattr(section, f.name) is None:
                handed.pop(f.metadata["env"], None)
        handed.update(cfg.to_environment(section))
    return handed


def run(serve: ServeConfig, cassandra: CassandraConfig, *, access_log: bool, log_level: str) -> None:
    """Serve until interrupted."""
    warning = check_exposure(
        serve.http_host, serve.http_port, tls=serve.tls, token=serve.token is not None, insecure=serve.insecure
    )
    check_tls_files(serve)
    # On stderr, as the CLI's warnings: this module's logger has no handler outside uvicorn's run.
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"statestore serve: {security_line(serve)}", file=sys.stderr)
    # host and port only for uvicorn's "running on" line: the sockets are bound here.
    options = {"host": serve.http_host, "port": serve.http_port, "access_log": access_log, "log_level": log_level}
    if serve.tls:
        options |= {"ssl_certfile": serve.tls_cert_file, "ssl_keyfile": serve.tls_key_file}
    if serve.workers == 1:
        sock = listening_socket(serve.http_host, serve.http_port, reuse_port=False)
        _serve(serve, cassandra, sock, options)
        return
    # Checked here, before any worker starts: a port held by another program is one clear error.
    listening_socket(serve.http_host, serve.http_port, reuse_port=True).close()
    handed = worker_environment(os.environ, cassandra, serve)
    for name in set(os.environ) - set(handed):
        del os.environ[name]
    os.environ.update(handed)
    # The workers' request metrics, summed by whichever worker a scrape reaches (http.metrics).
    shared = tempfile.mkdtemp(prefix="statestore-metrics-")
    os.environ[MULTIPROCESS_DIR_ENV] = shared
    try:
        _supervise(serve.workers, options)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _worker(options: dict) -> None:
    """One worker process: the settings from the environment its parent set, its own socket."""
    serve, cassandra = cfg.resolve(ServeConfig), cfg.resolve(CassandraConfig)
    try:
        sock = listening_socket(serve.http_host, serve.http_port, reuse_port=True)
    except ConfigError as exc:
        print(f"statestore serve worker {os.getpid()}: {exc}", file=sys.stderr)
        sys.exit(BIND_FAILED)
    _serve(serve, cassandra, sock, options)


def _serve(serve: ServeConfig, cassandra: CassandraConfig, sock: socket.socket, options: dict) -> None:
    app = build_app(serve, cassandra)
    protocol = admission_protocol(shed_limits(serve), on_shed=app.state.metrics.shed.inc)
    if protocol is not None:
        options = options | {"http": protocol}
    # Everything imported and built so far lives as long as the process: frozen, the cyclic
    # garbage collector stops walking it, so its full collections over FastAPI's, pydantic's
    # and the driver's objects no longer stall the event loop (tail latency of point gets).
    gc.freeze()
    uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])


@dataclass
class RestartBackoff:
    """How long to wait before replacing a worker that died: not at all after one that served
    a while, doubling from `first_s` up to `max_s` while replacements keep dying within
    `healthy_s` of their start (a crash loop: Cassandra unreachable at start, a bad setting),
    so such a loop neither spins the CPU nor floods the log."""

    first_s: float = 0.5
    max_s: float = 30.0
    healthy_s: float = 10.0
    quick_deaths: int = 0

    def delay(self, lived_s: float) -> float:
        if lived_s >= self.healthy_s:
            self.quick_deaths = 0
            return 0.0
        self.quick_deaths += 1
        return min(self.first_s * 2 ** (self.quick_deaths - 1), self.max_s)


def _supervise(count: int, options: dict) -> None:
    spawn = multiprocessing.get_context("spawn")
    stopping = []

    def start():
        process = spawn.Process(target=_worker, args=(options,), name="statestore-serve-worker", daemon=False)
        process.start()
        return process, time.monotonic()

    def stop(signum, _frame):
        stopping.append(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    slots = [start() for _ in range(count)]
    backoffs = [RestartBackoff() for _ in range(count)]
    due: dict[int, float] = {}  # slot -> when its replacement starts
    _log.info("serving with %d workers: %s", count, ", ".join(str(w.pid) for w, _ in slots))
    try:
        while not stopping:
            wait([w.sentinel for w, _ in slots if w.is_alive()], timeout=0.5)
            now = time.monotonic()
            for n, (worker, started) in enumerate(slots):
                if stopping or worker.is_alive():
                    continue
                if worker.exitcode == BIND_FAILED:
                    raise ConfigError("a worker could not listen on the port (its error is above)")
                if n not in due:
                    pause = backoffs[n].delay(now - started)
                    _log.warning(
                        "worker %d exited with code %s; starting another in %.1f s", worker.pid, worker.exitcode, pause
                    )
                    due[n] = now + pause
                if now >= due[n]:
                    del due[n]
                    slots[n] = start()
    finally:
        for worker, _ in slots:
            if worker.is_alive():
                worker.terminate()  # SIGTERM: uvicorn finishes the requests in flight
        for worker, _ in slots:
            worker.join(timeout=20)
            if worker.is_alive():
                worker.kill()
                worker.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
