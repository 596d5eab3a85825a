"""The CLI's query commands: get, range, prefix, all, count, history, windows, sessions, dump,
top, and `serve` (the HTTP API).

Each opens the store as registered (statestore.store.builder.open_store), reads keys given as text
with the store's key codec (statestore.present.text) and prints decoded values (an aggregate store's:
a column per measure, statestore.present.aggregates). What a store type
cannot do ends in the library's UnsupportedOperationError, which `main` prints (exit 2, a usage
error: statestore.cli.exits).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections.abc import Iterable
from itertools import islice

from statestore.cli import exits
from statestore.cli.args import (
    FORMATS,
    LAST_MS,
    TIME_FORMS,
    VALUE,
    add_format,
    add_store,
    at_least_1,
    parse_time,
)
from statestore.cli.output import emit
from statestore.cli.progress import tracked
from statestore.conn.cassandra import session_for
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig
from statestore.core.errors import UnsupportedOperationError
from statestore.core.model import KeyRange
from statestore.http import serve
from statestore.http.serving import ServeConfig
from statestore.present import aggregates
from statestore.present.text import parse_key, require_versioned, to_json, to_text, versioned
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.builder import open_session_store, open_store, open_window_store
from statestore.store.session import SessionStore
from statestore.store.table_stats import cluster_figures


def open_from_args(args, count_all: bool = False):
    config = cfg.from_args(CassandraConfig, args)
    return open_store(session_for(config), config.keyspace, args.store, count_all=count_all)


def _print_pairs(pairs: Iterable[tuple], fmt: str) -> int:
    return emit(pairs, ("key", "value"), fmt)


def _print_entries(store, pairs: Iterable[tuple], fmt: str) -> int:
    """A store's (key, value) pairs as rows: key, value; an aggregate store's key, then a
    column per measure (statestore.present.aggregates)."""
    spec = aggregates.spec_of(store.value_codec)
    if spec is None:
        return _print_pairs(pairs, fmt)
    return emit(aggregates.rows(pairs, spec), aggregates.header(spec), fmt)


def _timed_from_args(args):
    """The store as a WindowStore or SessionStore when it is a window or session store, else
    None (the caller opens it as a key-value or versioned store)."""
    config = cfg.from_args(CassandraConfig, args)
    session = session_for(config)
    kind = registry.lookup(session, config.keyspace, args.store).store_type
    if kind.windowed:
        return open_window_store(session, config.keyspace, args.store)
    if kind.sessioned:
        return open_session_store(session, config.keyspace, args.store)
    return None


def _store_or_timed(args):
    """(the store `args` name, None), or for a window or session store (None, its WindowStore or
    SessionStore): the commands that show such a store's rows their own way take it from here."""
    try:
        return open_from_args(args), None
    except UnsupportedOperationError:
        timed = _timed_from_args(args)
        if timed is None:
            raise
        return None, timed


def _counted(store) -> str:
    """The column of a (window or session) store's plain value: count for the word count's longs."""
    return "count" if store.value_codec.name == "long" else "value"


def cmd_get(args) -> int:
    store, timed = _store_or_timed(args)
    if isinstance(timed, SessionStore):
        return _get_sessions(timed, args)
    if timed is not None:
        return _get_windows(timed, args)
    key = parse_key(args.key, store.key_codec)
    if args.as_of is not None:
        require_versioned(store, "as-of reads")
        found = store.get(key, as_of=args.as_of)
    else:
        found = store.get(key)
    if found is None:
        when = "" if args.as_of is None else f" as of {args.as_of} ms"
        print(f"{args.key!r} is not in store {args.store}{when}", file=sys.stderr)
        return exits.NOT_FOUND
    spec = aggregates.spec_of(store.value_codec)
    if spec is not None and not versioned(store):  # the measures: one JSON object, or a column each
        if args.format == VALUE:
            print(aggregates.value_text(found))
        else:
            emit([aggregates.row(key, found, spec)], aggregates.header(spec), args.format)
        return 0
    if not versioned(store):
        row, header = (key, found), ("key", "value")
    else:
        row, header = (key, found.value, found.valid_from, found.valid_to), ("key", "value", "valid_from", "valid_to")
    if args.format == VALUE:
        print(to_text(row[1]))  # the word count's `statestore get STORE WORD` prints just the count
    else:
        emit([row], header, args.format)
    return 0


def _get_windows(store, args) -> int:
    """`get` on a window store: the key's windows, oldest first (retention applied), each with
    its value (an aggregate store's: its measures); exit 3 when it has none."""
    if args.as_of is not None:
        raise UnsupportedOperationError(
            f"--as-of reads versions; store '{store.name}' is a window store: its windows are the key's history"
        )
    key, size = parse_key(args.key, store.key_codec), store.windowing.size_ms
    found = store.fetch(key, 0, LAST_MS)
    if not found:
        print(f"{args.key!r} has no window in store {args.store}", file=sys.stderr)
        return exits.NOT_FOUND
    spec = aggregates.spec_of(store.value_codec)
    if args.format == VALUE:  # a JSON object per window, on one line each
        counted = _counted(store)
        for start, value in found:
            results = value if spec is not None else {counted: to_json(value)}
            print(aggregates.window_text(start, start + size, results))
        return 0
    _print_windows(store, ((key, start, start + size, value) for start, value in found), args.format)
    return 0


def _print_windows(store, windows: Iterable[tuple], fmt: str) -> int:
    """(key, window start, window end, value) rows as `windows` prints them: key, window_start,
    window_end and the count (or value); an aggregate store's: a column per measure."""
    spec = aggregates.spec_of(store.value_codec)
    if spec is None:
        return emit(windows, ("key", "window_start", "window_end", _counted(store)), fmt)
    rows = (aggregates.window_row(key, start, end, value, spec) for key, start, end, value in windows)
    return emit(rows, aggregates.window_header(spec), fmt)


def _get_sessions(store, args) -> int:
    """`get` on a session store: the key's sessions, oldest first (retention applied), each with
    its value (an aggregate store's: its measures); exit 3 when it has none."""
    if args.as_of is not None:
        raise UnsupportedOperationError(
            f"--as-of reads versions; store '{store.name}' is a session store: its sessions are the key's history"
        )
    key = parse_key(args.key, store.key_codec)
    found = store.fetch(key)  # by end, which is by start too: a key's sessions never overlap
    if not found:
        print(f"{args.key!r} has no session in store {args.store}", file=sys.stderr)
        return exits.NOT_FOUND
    if args.format == VALUE:  # a JSON object per session, on one line each
        plain = aggregates.spec_of(store.value_codec) is None
        for s in found:
            print(
                aggregates.session_text(s.start_ms, s.end_ms, {_counted(store): to_json(s.value)} if plain else s.value)
            )
        return 0
    _print_sessions(store, ((s.key, s.start_ms, s.end_ms, s.value) for s in found), args.format)
    return 0


def _print_sessions(store, sessions: Iterable[tuple], fmt: str) -> int:
    """(key, session start, session end, value) rows as `sessions` prints them: key,
    session_start, session_end and the count (or value); an aggregate store's: a column per measure."""
    spec = aggregates.spec_of(store.value_codec)
    if spec is None:
        return emit(sessions, ("key", "session_start", "session_end", _counted(store)), fmt)
    rows = (aggregates.window_row(key, start, end, value, spec) for key, start, end, value in sessions)
    return emit(rows, aggregates.session_header(spec), fmt)


def cmd_range(args) -> int:
    store = open_from_args(args)
    low = None if args.from_key is None else parse_key(args.from_key, store.key_codec)
    high = None if args.to_key is None else parse_key(args.to_key, store.key_codec)
    if low is not None and high is not None:  # the library's range: from above to is empty, as in Kafka Streams
        entries = store.reverse_range(low, high) if args.reverse else store.range(low, high)
    else:
        encode = store.key_codec.encode
        bounds = KeyRange(None if low is None else encode(low), None if high is None else encode(high))
        entries = store.entries(bounds, args.reverse)
    _print_entries(store, entries, args.format)
    return 0


def cmd_prefix(args) -> int:
    store = open_from_args(args)
    _print_entries(store, store.prefix_scan(parse_key(args.prefix, store.key_codec)), args.format)
    return 0


def cmd_all(args) -> int:
    store = open_from_args(args)
    entries = store.reverse_all() if args.reverse else store.all()
    _print_entries(store, entries if args.limit is None else islice(entries, args.limit), args.format)
    return 0


def cmd_count(args) -> int:
    exact = not args.estimate
    store, timed = _store_or_timed(args)  # a window or session store: its windows or sessions (retention applied)
    store = timed if store is None else store
    entries = store.count_entries() if exact else store.approximate_num_entries()  # exact: reads every entry
    note = ""
    if not exact:
        figures = cluster_figures(store.session, store.spec.keyspace, store.spec.table)
        shortfall = "" if figures.complete else f" (nodes down or failing: {', '.join(figures.nodes_failed)})"
        note = (
            "approximate: Cassandra's size estimate of flushed data, refreshed every few minutes (0 before the "
            f"first flush), from {figures.nodes_answered} of {figures.nodes_total} nodes{shortfall}; without "
            "--estimate, count counts every entry with SELECT COUNT(*), which reads the whole store"
        )
    if args.format == VALUE:
        print(entries)  # the number alone: exact, unless --estimate asked for the estimate by name
    elif args.format == "json":
        found = {"store": args.store, "entries": entries, "exact": exact, "estimate": not exact}
        print(json.dumps(found, indent=2))
    elif args.format == "table":
        shown = entries if exact else f"about {entries:,}"
        emit([(args.store, shown, exact)], ("store", "entries", "exact"), args.format)
        if note:  # the table is read by people: the caveat goes with it
            print(f"about {entries:,}: {note}")
            return 0
    else:
        emit([(args.store, entries, exact)], ("store", "entries", "exact"), args.format)
    if note:
        print(f"about {entries:,} entries, {note}", file=sys.stderr)
    return 0


def cmd_history(args) -> int:
    store = open_from_args(args)
    key = parse_key(args.key, store.key_codec)
    require_versioned(store, "history")
    rows = ((v.valid_from, v.valid_to, v.value) for v in store.history(key, args.from_ms, args.to_ms))
    emit(rows, ("valid_from", "valid_to", "value"), args.format)
    return 0


def cmd_windows(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    store = open_window_store(session_for(config), config.keyspace, args.store)
    low, high = args.from_ms or 0, LAST_MS if args.to_ms is None else args.to_ms
    if args.key is None:
        windows = ((w.key, w.start_ms, w.end_ms, w.value) for w in store.fetch_all(low, high))
    else:
        key, size = parse_key(args.key, store.key_codec), store.windowing.size_ms
        windows = ((key, start, start + size, value) for start, value in store.fetch(key, low, high))
    _print_windows(store, windows, args.format)
    return 0


def cmd_sessions(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    store = open_session_store(session_for(config), config.keyspace, args.store)
    # A key's sessions never overlap: by end is by start too.
    found = store.all() if args.key is None else store.fetch(parse_key(args.key, store.key_codec))
    _print_sessions(store, ((s.key, s.start_ms, s.end_ms, s.value) for s in found), args.format)
    return 0


def cmd_dump(args) -> int:
    config = cfg.from_args(CassandraConfig, args)
    spec = registry.lookup(session_for(config), config.keyspace, args.store)
    if spec.store_type.timed:  # every retained window or session, as `windows` / `sessions` print them
        every = argparse.Namespace(**vars(args), key=None, from_ms=None, to_ms=None)
        return cmd_sessions(every) if spec.store_type.sessioned else cmd_windows(every)
    store = open_store(session_for(config), config.keyspace, args.store)
    # A bar only on a terminal; its total is the store's estimate (the count may run past it).
    total = store.approximate_num_entries() if sys.stderr.isatty() else 0
    _print_entries(store, tracked(store.all(), total, f"dumping {store.name}", "entries"), args.format)
    return 0


def cmd_top(args) -> int:
    store, timed = _store_or_timed(args)
    if isinstance(timed, SessionStore):
        return _top_sessions(timed, args)
    if timed is not None:
        return _top_windows(timed, args)
    spec = aggregates.spec_of(store.value_codec)
    if spec is None:
        if args.by is not None:
            raise aggregates.refuse_by(store.name, store.value_codec.name)
        _print_pairs(admin.top_of(store, args.limit), args.format)
        return 0
    measure = aggregates.rank_measure(spec, args.by, store.name)
    _print_entries(store, aggregates.top_by(store.all(), measure.name, args.limit), args.format)
    return 0


def _ranked_measure(store, args, listing: str) -> str | None:
    """What `top` ranks a window or session store by: an aggregate store's measure (--by, or its
    first count), or None for a store of numbers; refused for --by on a count store and for a
    store of other values (`listing`: the command that lists them)."""
    spec = aggregates.spec_of(store.value_codec)
    if spec is not None:
        return aggregates.rank_measure(spec, args.by, store.name).name
    if args.by is not None:
        raise aggregates.refuse_by(store.name, store.value_codec.name)
    if store.value_codec.name not in ("long", "int"):
        raise UnsupportedOperationError(
            f"top entries rank numeric values; store '{store.name}' holds {store.value_codec.name} values: "
            f"list them with `statestore {listing} {store.name}` instead"
        )
    return None


def _top_windows(store, args) -> int:
    """`top` on a window store: its --windows newest windows (none after its stream time), newest
    first, each with its --limit highest values (an aggregate store's: by a measure), as the
    store page shows them."""
    measure = _ranked_measure(store, args, "windows")
    latest = [(start, [(w.key, w.value) for w in found]) for start, found in store.latest(args.windows)]
    if measure is None:
        ranked = [
            (start, heapq.nsmallest(args.limit, pairs, key=lambda kv: (-kv[1], kv[0]))) for start, pairs in latest
        ]
    else:
        ranked = aggregates.top_windows(latest, measure, args.limit)
    size = store.windowing.size_ms
    _print_windows(store, ((k, start, start + size, v) for start, top in ranked for k, v in top), args.format)
    return 0


def _top_sessions(store, args) -> int:
    """`top` on a session store: its --limit sessions (retention applied) of the highest value (an
    aggregate store's: of a measure), ties by key then start, each with its bounds. Reads the whole
    store once, keeping a bounded heap."""
    measure = _ranked_measure(store, args, "sessions")
    found = ((s.key, s.start_ms, s.end_ms, s.value) for s in store.all())
    _print_sessions(store, aggregates.top_sessions(found, measure, args.limit), args.format)
    return 0


def cmd_serve(args) -> int:
    serve.run(
        cfg.from_args(ServeConfig, args),
        cfg.from_args(CassandraConfig, args),
        access_log=not args.no_access_log,
        log_level=args.log_level,
    )
    return 0


def add_commands(command) -> None:
    """Register the query commands with `command(name, func, help, fmt=...)` of the main parser,
    in the order `statestore --help` lists them."""
    for add in (
        _add_get,
        _add_range,
        _add_prefix,
        _add_all,
        _add_count,
        _add_history,
        _add_windows,
        _add_sessions,
        _add_dump,
        _add_top,
        _add_serve,
    ):
        add(command)


def _add_time_bounds(p, from_help: str, to_help: str) -> None:
    """The `--from`/`--to` TIME bounds of `history` and `windows` (each command says which are inclusive)."""
    p.add_argument("--from", dest="from_ms", type=parse_time, metavar="TIME", help=from_help)
    p.add_argument("--to", dest="to_ms", type=parse_time, metavar="TIME", help=to_help)


def _add_get(command) -> None:
    p = command(
        "get",
        cmd_get,
        "print the value of one key (the count, for the word count; an aggregate store's measures as one JSON "
        "object; a window or session store's windows or sessions of the key, oldest first, one JSON object of its "
        "bounds and value or measures each); exit 3 if absent",
    )
    add_store(p)
    p.add_argument("key", help="the key as text: string as is, long/int decimal, json as JSON, bytes as hex")
    p.add_argument(
        "--as-of",
        type=parse_time,
        metavar="TIME",
        help=f"versioned stores: the value valid at TIME. {TIME_FORMS}",
    )
    add_format(
        p,
        (VALUE, *FORMATS),
        VALUE,
        " (the others: a key, value row; versioned stores add valid_from, valid_to; aggregate stores: key and a "
        "column per measure)",
    )


def _add_range(command) -> None:
    p = command(
        "range",
        cmd_range,
        "entries with keys from --from to --to (both inclusive), in key order",
        fmt="table",
    )
    add_store(p)
    p.add_argument(
        "--from", dest="from_key", metavar="KEY", help="lowest key, inclusive (a key, not a time; default: the first)"
    )
    p.add_argument(
        "--to", dest="to_key", metavar="KEY", help="highest key, inclusive (a key, not a time; default: the last)"
    )
    p.add_argument("--reverse", action="store_true", help="descending key order")


def _add_prefix(command) -> None:
    p = command("prefix", cmd_prefix, "entries whose key starts with PREFIX, in key order", fmt="table")
    add_store(p)
    p.add_argument("prefix")


def _add_all(command) -> None:
    p = command("all", cmd_all, "every entry in key order (global stores: sorted on the way)", fmt="table")
    add_store(p)
    p.add_argument("--reverse", action="store_true", help="descending key order")
    p.add_argument("--limit", type=at_least_1, metavar="N", help="stop after N entries")


def _add_count(command) -> None:
    p = command(
        "count",
        cmd_count,
        "the number of entries (window and session stores: of windows or sessions, retention applied), exact (it "
        "reads every entry); "
        "--estimate: Cassandra's quick size estimate, labelled as one",
    )
    add_store(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument(
        "--estimate",
        action="store_true",
        help="Cassandra's size estimate instead of an exact count: quick, but of flushed data only, refreshed every "
        "few minutes (0 before the first flush), so it can be far off; stderr says so, and every format but value "
        "marks it",
    )
    how.add_argument(
        "--exact",
        action="store_true",
        help="count every entry (SELECT COUNT(*), slow on big stores): the default, kept for scripts that give it",
    )
    add_format(
        p,
        (VALUE, *FORMATS),
        VALUE,
        ' (the others: a store, entries, exact row; json adds "estimate": true|false, table shows an '
        'estimate as "about N" with what it stands for)',
    )


def _add_history(command) -> None:
    p = command(
        "history",
        cmd_history,
        "every version of a key, oldest first (versioned stores); --from/--to pick the versions valid "
        "at some time from --from (inclusive) to --to (exclusive)",
        fmt="table",
    )
    add_store(p)
    p.add_argument("key")
    _add_time_bounds(
        p,
        "versions still valid at or after TIME (inclusive; default: the first)",
        f"versions that began before TIME (exclusive; default: no limit). {TIME_FORMS}",
    )


def _add_windows(command) -> None:
    p = command(
        "windows",
        cmd_windows,
        "a window store's windows, by key then start (retention applied); --from/--to pick the windows "
        "starting from --from to --to (both inclusive)",
        fmt="table",
    )
    add_store(p)
    p.add_argument("key", nargs="?", help="one key's windows (default: every key)")
    _add_time_bounds(
        p,
        "windows starting at or after TIME (inclusive; default: the first)",
        f"windows starting at or before TIME (inclusive; default: no limit). {TIME_FORMS}",
    )


def _add_sessions(command) -> None:
    p = command(
        "sessions", cmd_sessions, "a session store's sessions, by key then start (retention applied)", fmt="table"
    )
    add_store(p)
    p.add_argument("key", nargs="?", help="one key's sessions (default: every key)")


def _add_dump(command) -> None:
    p = command(
        "dump",
        cmd_dump,
        "every entry, decoded, sorted by key (window and session stores: every window or session, as "
        "`windows` / `sessions` print them)",
        fmt="table",
        old_fmt="csv",
    )
    add_store(p)


def _add_top(command) -> None:
    p = command(
        "top",
        cmd_top,
        "the entries with the highest values (aggregate stores: the highest of one measure, every measure shown; "
        "window stores: the keys of each of the newest windows; session stores: the sessions, ties by key then "
        "start)",
        fmt="table",
    )
    add_store(p)
    p.add_argument("-n", "--limit", type=at_least_1, default=20, metavar="N", help="how many (default 20)")
    p.add_argument(
        "--by",
        metavar="MEASURE",
        help="aggregate stores: the measure to rank by, a number (count, sum, sum_int, min, max or distinct; "
        "default: the store's first count measure)",
    )
    p.add_argument(
        "--windows",
        type=at_least_1,
        default=3,
        metavar="N",
        help="window stores: rank the keys of each of the N newest windows up to the stream time (default 3), "
        "newest first, a row per window and key",
    )


def _add_serve(command) -> None:
    p = command("serve", cmd_serve, "serve the read-only HTTP API (OpenAPI document at /docs)")
    cfg.add_arguments(p, ServeConfig)
    p.add_argument("--no-access-log", action="store_true", help="do not log every request")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
