"""Who may read the API `statestore serve` serves: a bearer token on every request, TLS on the
connection, and the rule that refuses to listen beyond loopback without both.

The token is compared in constant time (over SHA-256 digests, so not even its length shows in
the timing); a request without it, or with another, is answered 401 with `WWW-Authenticate:
Bearer` (RFC 6750) before it reaches the routes, the point-get fast path or Cassandra. `/health`
and `/metrics` may be left open on their own (a load balancer's probe, a Prometheus scraper
without credentials). The token is never logged and never in an answer or an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Collection

from starlette.types import ASGIApp, Receive, Scope, Send

from statestore.core.errors import ConfigError
from statestore.http.answers import error
from statestore.http.paths import app_path

OPENABLE = ("/health", "/metrics")  # the paths that may be served without the token
MIN_TOKEN_CHARS = 16
# RFC 6750's b64token: what may follow "Bearer " in a header without quoting.
_TOKEN_FORM = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
REALM = 'Bearer realm="statestore"'
TLS_FLAGS = "--tls-cert and --tls-key (STATESTORE_HTTP_TLS_CERT / STATESTORE_HTTP_TLS_KEY)"
TOKEN_WAYS = "a token in STATESTORE_HTTP_TOKEN or in a file named by --token-file (STATESTORE_HTTP_TOKEN_FILE)"
MAKE_TOKEN = "make one with `openssl rand -hex 32`"


def token_problem(token: str) -> str | None:
    """Why `token` cannot be the API's token (None: it can). Never repeats the token."""
    if len(token) < MIN_TOKEN_CHARS:
        return f"it has {len(token)} characters, fewer than {MIN_TOKEN_CHARS}"
    if not _TOKEN_FORM.fullmatch(token):
        return "it may hold only letters, digits and - . _ ~ + / (and = at its end), as a bearer token in a header"
    return None


def is_loopback(host: str) -> bool:
    """Whether listening on `host` reaches this machine alone: 127.0.0.0/8, ::1 and `localhost`.
    Any other name counts as beyond loopback (it may resolve elsewhere); "" and 0.0.0.0 are
    every interface."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, port: int, *, tls: bool, token: bool, insecure: bool) -> str | None:
    """Refuse (ConfigError) to listen beyond loopback without TLS and a token, unless `insecure`;
    return the warning to log when `insecure` lets such a bind through (None: nothing to say)."""
    missing = [what for what, given in (("TLS", tls), ("a token", token)) if not given]
    if is_loopback(host) or not missing:
        return None
    without = " and ".join(missing)
    if insecure:
        return f"--insecure: listening on {host}:{port} without {without}: anyone who can reach the port " + (
            "reads every store of the keyspace" if not token else "sees the token and every answer in clear"
        )
    needs = [TLS_FLAGS] if not tls else []
    needs += [f"{TOKEN_WAYS} ({MAKE_TOKEN})"] if not token else []
    raise ConfigError(
        f"refusing to listen on {host}:{port} without {without}: anyone who can reach the port would "
        f"{'read every store of the keyspace' if not token else 'see the token and every answer in clear'}. "
        f"Give {' and '.join(needs)}; or listen on loopback (--host 127.0.0.1, the default); or, on a "
        "network you trust, say --insecure"
    )


def _digest(raw: bytes) -> bytes:
    return hashlib.sha256(raw).digest()


class BearerAuth:
    """ASGI middleware: every HTTP request carries `Authorization: Bearer <token>`, except those
    for `open_paths` (paths inside the app, as app_path gives them)."""

    def __init__(self, app: ASGIApp, token: str, open_paths: Collection[str] = ()) -> None:
        unknown = set(open_paths) - set(OPENABLE)
        if unknown:
            raise ValueError(f"only {', '.join(OPENABLE)} may be open, not {', '.join(sorted(unknown))}")
        self.app = app
        self._expected = _digest(token.encode())
        self._open = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or app_path(scope) in self._open:
            await self.app(scope, receive, send)
            return
        presented = bearer_token(scope.get("headers", ()))
        if presented is not None and hmac.compare_digest(_digest(presented), self._expected):
            await self.app(scope, receive, send)
            return
        if presented is None:
            answer = error(401, "this API needs a token: send the header `Authorization: Bearer <token>`")
            answer.headers["WWW-Authenticate"] = REALM
        else:
            answer = error(401, "the bearer token is not valid")
            answer.headers["WWW-Authenticate"] = f'{REALM}, error="invalid_token"'
        await answer(scope, receive, send)


def bearer_token(headers) -> bytes | None:
    """The token of the request's one `Authorization: Bearer <token>` header (the scheme in any
    case); None when there is no such header, or more than one Authorization header."""
    values = [value for name, value in headers if name.lower() == b"authorization"]
    if len(values) != 1:
        return None
    scheme, _, token = values[0].strip().partition(b" ")
    token = token.strip()
    if scheme.lower() != b"bearer" or not token:
        return None
    return token
