"""The provider reference (docs/provider-reference.md), generated from the code so it cannot drift:

    python -m statestore_airflow.reference > docs/provider-reference.md

Connection types from the provider's metadata (statestore_airflow.provider, what Airflow's
providers manager reads), hooks and operators from their classes (signatures, docstrings,
template fields), the plugin from its class, the example DAGs' trigger forms from their
params. A unit test compares the committed page with `markdown()`. Plain Markdown, no links,
so a strict docs build has nothing to resolve.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from typing import Any

from statestore_airflow import provider

_SPECIAL = re.compile(r"([\\*_\[\]<>#|])")
_PARAM = re.compile(r"^:param (\w+):\s*(.*)$")
# The standard connection fields, in the order Airflow's form shows them.
_STANDARD_FIELDS = ("host", "schema", "login", "password", "port", "extra")


def _text(raw: str) -> str:
    """Prose as Markdown: code spans kept, Markdown and HTML characters escaped elsewhere."""
    parts = raw.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans at all
        parts = [raw.replace("`", "'")]
    return "".join(f"`{part}`" if i % 2 else _SPECIAL.sub(r"\\\1", part) for i, part in enumerate(parts))


def _doc(obj: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """A docstring as paragraphs (lines joined) and its `:param name: text` entries."""
    paragraphs: list[str] = []
    params: list[tuple[str, str]] = []
    current: list[str] = []
    for line in [*(inspect.getdoc(obj) or "").splitlines(), ""]:
        line = line.strip()
        match = _PARAM.match(line)
        if match:
            params.append((match.group(1), match.group(2)))
        elif params and line and not current:  # a :param: entry continued on the next line
            params[-1] = (params[-1][0], f"{params[-1][1]} {line}")
        elif line:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    return paragraphs, params


def _literal(value: Any) -> str:
    """A default as the code formatter writes it (strings in double quotes: `ruff format`
    checks the page's code blocks)."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _signature(name: str, function: Any, more: bool = False) -> str:
    """`name(args)` without self and **kwargs (`more`: with them, as `**kwargs`)."""
    sig = inspect.signature(function)
    shown = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD and p.name != "self"]
    args, keyword_only = [], False
    for p in shown:
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            args.append("*")
            keyword_only = True
        args.append(p.name if p.default is p.empty else f"{p.name}={_literal(p.default)}")
    if more:
        args.append("**kwargs")
    return f"{name}({', '.join(args)})"


def _schema_type(schema: dict[str, Any]) -> str:
    kinds = schema.get("type")
    kinds = [k for k in (kinds if isinstance(kinds, list) else [kinds]) if k != "null"]
    text = " or ".join(kinds)
    if "enum" in schema:
        text += ": " + ", ".join(str(v) for v in schema["enum"] if v is not None)
    return text


def _connection_type(info: dict[str, Any], hooks: dict[str, type]) -> list[str]:
    hook = hooks[info["hook-class-name"]]
    behaviour = info.get("ui-field-behaviour", {})
    hidden = set(behaviour.get("hidden-fields", []))
    relabel = behaviour.get("relabeling", {})
    placeholders = behaviour.get("placeholders", {})
    lines = [
        f"### `{info['connection-type']}`: {_text(info['hook-name'])}",
        "",
        f"Hook `{info['hook-class-name']}`; default connection id `{hook.default_conn_name}`.",
        "",
        "| field | on the form | example |",
        "|---|---|---|",
    ]
    for field in _STANDARD_FIELDS:
        if field in hidden:
            continue
        example = placeholders.get(field)
        lines.append(
            f"| `{field}` | {_text(relabel.get(field, field.capitalize()))} | {f'`{example}`' if example else ''} |"
        )
    lines += ["", "Extras (fields of the form; in a JSON `extra`, by these names):", ""]
    lines += ["| extra | on the form | type | default | what it is |", "|---|---|---|---|---|"]
    for name, field in info["conn-fields"].items():
        schema = field["schema"]
        default = f"`{schema['default']!r}`" if "default" in schema else ""
        description = _text(field.get("description", ""))
        lines.append(
            f"| `{name}` | {_text(field['label'])} | {_text(_schema_type(schema))} | {default} | {description} |"
        )
    return [*lines, ""]


def _members(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties `cls` defines itself, in source order."""
    found = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property) or inspect.isfunction(member):
            found.append((name, member))
    return found


def _class(cls: type, more: bool = False) -> list[str]:
    paragraphs, params = _doc(cls)
    lines = [
        f"### {cls.__name__}",
        "",
        "```python",
        f"from {cls.__module__} import {cls.__name__}",
        "",
        _signature(cls.__name__, cls.__init__, more),
        "```",
        "",
        f"Based on `{cls.__mro__[1].__module__}.{cls.__mro__[1].__name__}`.",
        "",
    ]
    lines += [line for p in paragraphs for line in (_text(p), "")]
    if params:
        lines += ["**Parameters**", ""]
        lines += [f"- `{name}`: {_text(text)}" for name, text in params]
        lines.append("")
    return lines


def _hook(cls: type) -> list[str]:
    lines = _class(cls)
    lines += ["**Methods**", ""]
    for name, member in _members(cls):
        if isinstance(member, property):
            call, doc = name, inspect.getdoc(member.fget) or ""
        else:
            call, doc = _signature(name, member), inspect.getdoc(member) or ""
        summary = " ".join(line.strip() for line in doc.splitlines() if line.strip())
        lines.append(f"- `{call}`" + (f": {_text(summary)}" if summary else ""))
    return [*lines, ""]


def _operator(cls: type) -> list[str]:
    base = cls.__mro__[1].__name__
    lines = _class(cls, more=True)
    lines += [f"`**kwargs`: every argument of `{base}` (`application`, `application_args`, `conf`, ...).", ""]
    fields = ", ".join(f"`{f}`" for f in cls.template_fields)
    lines += [f"Templated fields (Jinja, rendered when the task runs): {fields}.", ""]
    return lines


def _plugin(cls: type) -> list[str]:
    lines = [f"### {cls.__name__}", "", f"`{cls.__module__}.{cls.__name__}`, plugin name `{cls.name}`.", ""]
    lines += [line for p in _doc(cls)[0] for line in (_text(p), "")] if vars(cls).get("__doc__") else []
    for app in cls.fastapi_apps:
        lines.append(f"- API server app at `{app['url_prefix']}/`: {_text(app['name'])}")
    for view in cls.external_views:
        lines.append(f"- UI link *{_text(view['category'].capitalize())} → {_text(view['name'])}* to `{view['href']}`")
    return [*lines, ""]


def _dag(dag: Any) -> list[str]:
    schedule = "none: runs when triggered" if dag.schedule is None else f"`{dag.schedule}` (UTC)"
    paused = {None: "as Airflow's `dags_are_paused_at_creation` says", False: "no"}[dag.is_paused_upon_creation]
    lines = [f"### {dag.dag_id}", "", _text(dag.description or ""), ""]
    lines += [f"Schedule {schedule}; paused when first parsed: {paused}.", ""]
    lines += ["| param | on the form | type | default | what it is |", "|---|---|---|---|---|"]
    for name in dag.params:
        param = dag.params.get_param(name)
        schema = param.schema
        kinds = schema.get("type")
        optional = "null" in (kinds if isinstance(kinds, list) else [kinds])
        kind = _text(_schema_type(schema)) + (" (may stay empty)" if optional else "")
        default = "" if param.value in (None, "") else f"`{json.dumps(param.value)}`"
        description = _text(param.description or schema.get("description") or "")
        lines.append(f"| `{name}` | {_text(schema.get('title', ''))} | {kind} | {default} | {description} |")
    return [*lines, ""]


def markdown() -> str:
    from statestore_airflow.hook import CassandraStateStoreHook
    from statestore_airflow.kafka_hook import StateStoreKafkaHook
    from statestore_airflow.operators import MaintenanceJobOperator
    from statestore_airflow.plugin import StateStorePlugin

    info = provider.get_provider_info()
    hooks = {f"{h.__module__}.{h.__name__}": h for h in (CassandraStateStoreHook, StateStoreKafkaHook)}
    lines = [
        "# Provider reference",
        "",
        "<!-- Generated by `python -m statestore_airflow.reference > docs/provider-reference.md`: "
        "do not edit by hand. -->",
        "",
        f"The Airflow provider `{info['package-name']}` ({_text(info['name'])}): "
        f"{_text(info['description'])}. It comes with the `statestore` distribution "
        "(`pip install 'statestore[airflow]'`) as the package `statestore_airflow`; Airflow finds it through "
        "the entry points `apache_airflow_provider` (the connection types below) and `airflow.plugins` "
        "(the store page). Every connection type, hook, operator and plugin it has is on this page, "
        "and the trigger forms of its example DAGs.",
        "",
        "## Connection types",
        "",
    ]
    for connection in info["connection-types"]:
        lines += _connection_type(connection, hooks)
    lines += ["## Hooks", ""]
    for hook in hooks.values():
        lines += _hook(hook)
    lines += ["## Operators", ""]
    lines += _operator(MaintenanceJobOperator)
    lines += ["## Plugin", ""]
    lines += _plugin(StateStorePlugin)
    lines += [
        "## DAGs and their trigger forms",
        "",
        "The example DAGs (`statestore_airflow.example_dags`; `dags/` of the repository) and the "
        "params of their trigger forms, which a REST trigger passes as `conf`.",
        "",
    ]
    for module in ("wordcount_stream", "state_store_admin", "state_maintenance", "own_aggregation"):
        lines += _dag(importlib.import_module(f"statestore_airflow.example_dags.{module}").dag)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
