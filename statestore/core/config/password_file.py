"""Secrets given as files (a mounted secret): the password a file holds, or a ConfigError saying why not."""

from __future__ import annotations

from statestore.core.errors import ConfigError


def read_password_file(path: str, source: str, what: str = "password") -> str:
    """The password (or other secret: `what`) a file holds: its content, a trailing newline
    stripped. `source` names the setting that gave the file, for the error (unreadable, not
    UTF-8, empty)."""
    try:
        with open(path, encoding="utf-8") as f:
            password = f.read().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the {what} file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: the {what} file {path} is not UTF-8 text") from None
    if not password:
        raise ConfigError(f"{source}: the {what} file {path} is empty")
    return password
