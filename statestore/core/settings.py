"""How a setting is declared and resolved: one precedence chain, defaults < STATESTORE_*
environment < flags.

Every setting is a field of a frozen dataclass (the sections in statestore.core.config and
statestore.http.serving) whose metadata names its environment variable, its command-line flag
and its help text, so the CLI, the jobs and the Airflow hook all resolve settings the same way
(`resolve`) and document them from one place (`add_arguments`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Collection, Mapping
from dataclasses import field
from typing import Any

from statestore.core.errors import ConfigError


def setting(default: Any, env: str, flag: str | None, help: str, parse=str, secret: bool = False, switch: bool = False):
    """A setting's field. `flag` None: read from the environment only, never from a command line
    (a secret that only a file or a variable may carry: a command line is readable by every user)."""
    return field(
        default=default,
        repr=not secret,
        metadata={"env": env, "flag": flag, "help": help, "parse": parse, "secret": secret, "switch": switch},
    )


def parse_bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("use true or false")


def parse_hosts(raw: str) -> tuple[str, ...]:
    hosts = tuple(h.strip() for h in raw.split(",") if h.strip())
    if not hosts:
        raise ValueError("give at least one host")
    return hosts


def parse_port(raw: str) -> int:
    port = int(raw)
    if not 0 < port < 65536:
        raise ValueError("a TCP port is 1-65535")
    return port


def parse_positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def parse_non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def parse_positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError("must be greater than 0")
    return value


def _parse(cls: type, f: dataclasses.Field, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return f.metadata["parse"](raw)
    except (ValueError, TypeError) as exc:
        shown = "<hidden>" if f.metadata.get("secret") else repr(raw)
        source = " / ".join(filter(None, (f.metadata["flag"], f.metadata["env"])))
        raise ConfigError(f"{source}: {shown} is not valid: {exc}") from None


def resolve(cls: type, env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None):
    """Build `cls` from its defaults, then the environment, then explicit overrides.

    `overrides` maps field names to values (e.g. parsed flags); None means "not given".
    """
    env = os.environ if env is None else env
    overrides = overrides or {}
    values = {}
    for f in dataclasses.fields(cls):
        if overrides.get(f.name) is not None:
            values[f.name] = _parse(cls, f, overrides[f.name])
        elif f.metadata["env"] in env:
            values[f.name] = _parse(cls, f, env[f.metadata["env"]])
    return cls(**values)


class _SecretFlag(argparse.Action):
    """A secret given as a flag: taken, with a warning on stderr, since every user of the machine
    can read a process's command line (`ps`, /proc/<pid>/cmdline)."""

    def __init__(self, option_strings, dest, instead: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.instead = instead

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"warning: {option_string} is visible to other users of this machine (ps, /proc/<pid>/cmdline); "
            f"pass it {self.instead} instead",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


class _RefusedFlag(argparse.Action):
    """The flag a secret without one would have (`--token` for `token`): refused, its value never
    shown. Without it argparse would take `--token X` as an abbreviation of `--token-file X`."""

    def __init__(self, option_strings, dest, instead: str, **kwargs):
        super().__init__(option_strings, dest, nargs="?", **kwargs)
        self.instead = instead

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(
            f"{option_string} is not taken on the command line, which every user of this machine can read "
            f"(ps, /proc/<pid>/cmdline): give it {self.instead}"
        )


def _instead_of(cls: type, secret: dataclasses.Field) -> str:
    """Where else a secret setting can come from: its variable and, if `cls` has one, the
    <name>_file setting naming a file that holds it."""
    ways = [f"in the environment ({secret.metadata['env']})"]
    for f in dataclasses.fields(cls):
        if f.name == f"{secret.name}_file":
            ways.append(f"in a file named by {f.metadata['flag']} / {f.metadata['env']}")
    return " or ".join(ways)


def add_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    only: Collection[str] | None = None,
    title: str | None = None,
    default: Any = None,
    hidden: bool = False,
) -> None:
    """Add one flag per setting of `cls`; unset flags stay `default` (None, so `resolve` falls
    through; argparse.SUPPRESS leaves them out of the namespace). `only` picks settings by field
    name, `title` names their group (default: the class's docstring), `hidden` keeps them out of
    --help (accepted, not listed)."""
    group = parser.add_argument_group(title or cls.__doc__.strip().rstrip("."))
    taken = {action.dest for action in parser._actions}
    for f in dataclasses.fields(cls):
        if only is not None and f.name not in only:
            continue
        if f.metadata["flag"] is None:
            if f.metadata["secret"]:
                flag = "--" + f.name.replace("_", "-")
                instead = _instead_of(cls, f)
                group.add_argument(flag, dest=f.name, action=_RefusedFlag, instead=instead, help=argparse.SUPPRESS)
            continue
        # Two sections sharing a field name would share one argparse dest, and one flag's value
        # would silently land in the other section (`from_args` picks fields by name).
        if f.name in taken:
            raise TypeError(f"{cls.__name__}.{f.name} collides with another section's setting of that name")
        help_text = f"{f.metadata['help']} [env {f.metadata['env']}]"
        # A switch takes no value on the command line; "true" then goes through `resolve`.
        extra = {"action": "store_const", "const": "true"} if f.metadata["switch"] else {}
        if f.metadata["secret"]:
            extra = {"action": _SecretFlag, "instead": _instead_of(cls, f)}
        shown = argparse.SUPPRESS if hidden else help_text
        group.add_argument(f.metadata["flag"], dest=f.name, default=default, help=shown, **extra)
        if f.metadata["switch"] and f.default is True:  # a switch that is on: --no-<flag> turns it off
            off = "--no-" + f.metadata["flag"].removeprefix("--")
            shown = argparse.SUPPRESS if hidden else f"turn {f.metadata['flag']} off"
            group.add_argument(off, dest=f.name, action="store_const", const="false", default=default, help=shown)


def to_environment(settings: Any) -> dict[str, str]:
    """The STATESTORE_* variables that `resolve` turns back into `settings` (None fields left
    out): how a process hands its resolved settings to the processes it starts."""
    env = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if value is None:
            continue
        if isinstance(value, bool):
            env[f.metadata["env"]] = "true" if value else "false"
        elif isinstance(value, tuple):
            env[f.metadata["env"]] = ",".join(str(v) for v in value)
        else:
            env[f.metadata["env"]] = str(value)
    return env


def from_args(cls: type, args: argparse.Namespace, env: Mapping[str, str] | None = None):
    names = {f.name for f in dataclasses.fields(cls)}
    return resolve(cls, env, {k: v for k, v in vars(args).items() if k in names})
