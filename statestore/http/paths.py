"""Where a request goes inside the app, whether it is served alone or mounted under a prefix."""

from __future__ import annotations

from starlette.types import Scope


def app_path(scope: Scope) -> str:
    """The request's path inside the app: without the prefix the app is mounted under (the
    Airflow plugin mounts it at /statestore/api). Percent-decoded, as routes see it."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :]
    return path
