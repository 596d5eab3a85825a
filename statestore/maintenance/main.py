"""Command lines of the maintenance jobs (jobs/*.py are thin wrappers over `run`).

Exit codes, the same for every job: 0 done (warnings included), 3 a check failed (a
partition over the fail threshold under the fail policy, a store that differs from its
input), 2 a configuration or store error (message on stderr), 1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from statestore.conn.cassandra import require_keyspace, session_for
from statestore.conn.spark import build_session
from statestore.core import config as cfg
from statestore.core.config import CassandraConfig, KafkaConfig
from statestore.core.durations import parse_duration_ms
from statestore.core.errors import ConfigError, MaintenanceCheckError, StateStoreError
from statestore.maintenance.audit import report as audit_report
from statestore.maintenance.audit.partitions import AuditOptions, audit
from statestore.maintenance.compact import report as compact_report
from statestore.maintenance.compact.compaction import CompactOptions, compact
from statestore.maintenance.expire import report as expire_report
from statestore.maintenance.expire.entries import ExpireOptions, expire
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.maintenance.shared.selection import Policy, Thresholds, TimeBasis
from statestore.maintenance.shared.units import parse_size
from statestore.maintenance.validate import report as validate_report
from statestore.maintenance.validate.idempotency import ValidateOptions, validate
from statestore.store import admin

EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_CHECK_FAILED = 0, 1, 2, 3
_log = logging.getLogger("statestore.maintenance")


def _arg(parse: Callable):
    def checked(raw: str):
        try:
            return parse(raw)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return checked


def _write_reports(write: Callable, report, report_dir: Path, outcome: str) -> None:
    """Write a job's reports with its family's `write` and log `outcome` (what the job came to) and where they are."""
    paths = write(report, report_dir)
    _log.info("%s; reports: %s", outcome, ", ".join(map(str, paths)))


def _base_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--report-dir", type=Path, required=True, help="folder the reports are written to")
    parser.add_argument(
        "--spark-master", default=None, help="Spark master when not under spark-submit (default local[*])"
    )
    cfg.add_arguments(parser, CassandraConfig)
    cfg.add_arguments(parser, NodetoolConfig)
    return parser


def audit_parser() -> argparse.ArgumentParser:
    parser = _base_parser("audit_partitions", "Audit the partitions of every store: entries and bytes, thresholds.")
    parser.add_argument("--store", action="append", help="a store to audit (repeat; default every store)")
    parser.add_argument(
        "--warn-size", type=_arg(parse_size), default="100MiB", help="warn over this partition size (default 100MiB)"
    )
    parser.add_argument(
        "--fail-size", type=_arg(parse_size), default="400MiB", help="fail over this partition size (default 400MiB)"
    )
    parser.add_argument("--warn-entries", type=int, default=None, help="warn over this many entries in a partition")
    parser.add_argument("--fail-entries", type=int, default=None, help="fail over this many entries in a partition")
    parser.add_argument(
        "--policy",
        type=Policy,
        choices=list(Policy),
        default=Policy.FAIL,
        help="fail (default) or only warn on a breach of the fail threshold",
    )
    parser.add_argument(
        "--token-ranges",
        type=int,
        default=None,
        help="token ranges per store, one Spark task each (default 2 per core)",
    )
    parser.add_argument("--top", type=int, default=10, help="largest partitions listed per store (default 10)")
    parser.add_argument(
        "--flush", action="store_true", help="flush the tables first (nodetool), so Cassandra's figures cover all data"
    )
    return parser


def run_audit(args, spark, session, config: CassandraConfig, nodetool: Nodetool | None) -> int:
    options = AuditOptions(
        thresholds=Thresholds(args.warn_size, args.fail_size, args.warn_entries, args.fail_entries),
        policy=args.policy,
        token_ranges=args.token_ranges,
        top=args.top,
        flush=args.flush,
    )
    report = audit(spark, session, config, options, args.store, nodetool)
    _write_reports(audit_report.write, report, args.report_dir, f"audit of keyspace {report.keyspace}: {report.status}")
    for store in report.stores:
        for advice in store.recommendations:
            _log.warning("store %s: %s", store.store, advice)
    if report.status == "fail":
        raise MaintenanceCheckError(report.failure_message())
    return EXIT_OK


def expire_parser() -> argparse.ArgumentParser:
    parser = _base_parser("expire_state", "Delete store entries older than a retention (stream or processing time).")
    parser.add_argument("--store", action="append", required=True, help="a store to expire (repeat for several)")
    parser.add_argument(
        "--retention",
        type=_arg(parse_duration_ms),
        default=None,
        help="keep entries younger than this: 7d, 12h, 90m (key-value stores without a retention of their own; "
        "one with a retention expires by it; window stores expire by their own retention in stream time, "
        "dropping whole segments)",
    )
    parser.add_argument(
        "--basis",
        type=TimeBasis,
        choices=list(TimeBasis),
        default=TimeBasis.STREAM,
        help="stream (default: event time against the stream's latest event time) or processing (write time "
        "against the clock)",
    )
    parser.add_argument("--dry-run", action="store_true", help="count what would expire, delete nothing")
    parser.add_argument(
        "--table-ttl",
        type=_arg(parse_duration_ms),
        default=None,
        help="also set the table's default_time_to_live (e.g. 30d; 0 removes it) before expiring",
    )
    parser.add_argument("--token-ranges", type=int, default=None, help="token ranges per store (default 2 per core)")
    return parser


def run_expire(args, spark, session, config: CassandraConfig, nodetool: Nodetool | None) -> int:
    if args.table_ttl is not None:
        for store in args.store:
            admin.alter_store(session, config.keyspace, store, {"default_time_to_live": args.table_ttl // 1000})
    options = ExpireOptions(args.basis, args.retention, args.dry_run, args.token_ranges)
    report = expire(spark, session, config, args.store, options, nodetool)
    _write_reports(expire_report.write, report, args.report_dir, "expiry done")
    return EXIT_OK


def validate_parser() -> argparse.ArgumentParser:
    parser = _base_parser(
        "validate_idempotency",
        "Check a word-count or aggregate store against its input: recompute, replay, data-quality suite.",
    )
    cfg.add_arguments(parser, KafkaConfig)
    parser.add_argument("--store", required=True, help="the word-count or aggregate store to validate")
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where the store's stream started reading: earliest (default) or Spark's JSON of offsets",
    )
    parser.add_argument("--checkpoint", default=None, help="the stream's checkpoint, to replay its last batches")
    parser.add_argument("--replay-batches", type=int, default=3, help="batches to replay on a shadow copy (default 3)")
    parser.add_argument("--no-quality", action="store_true", help="skip the Great Expectations suite")
    parser.add_argument("--listed", type=int, default=20, help="differing keys named in the report (default 20)")
    parser.add_argument("--token-ranges", type=int, default=None, help="token ranges per store (default 2 per core)")
    return parser


def run_validate(args, spark, session, config: CassandraConfig, nodetool: Nodetool | None) -> int:
    options = ValidateOptions(
        starting_offsets=args.starting_offsets,
        checkpoint=args.checkpoint,
        replay_batches=args.replay_batches,
        listed=args.listed,
        token_ranges=args.token_ranges,
        quality=not args.no_quality,
    )
    report = validate(spark, session, config, args.kafka, args.store, options, args.report_dir)
    _write_reports(validate_report.write, report, args.report_dir, f"validation of store {args.store}: {report.status}")
    if report.status != "pass":
        raise MaintenanceCheckError(report.failure_message())
    return EXIT_OK


def compact_parser() -> argparse.ArgumentParser:
    parser = _base_parser(
        "compact_state", "Prune versioned history, report tombstones, ask Cassandra to compact when they pile up."
    )
    parser.add_argument("--store", action="append", help="a store to compact (repeat; default every store)")
    parser.add_argument(
        "--history-retention",
        type=_arg(parse_duration_ms),
        default=None,
        help="versioned stores: drop versions that ended longer ago than this (e.g. 30d); default: no pruning",
    )
    parser.add_argument(
        "--basis",
        type=TimeBasis,
        choices=list(TimeBasis),
        default=TimeBasis.STREAM,
        help="the history retention's clock: stream (default: the stream's latest event time) or processing (now)",
    )
    parser.add_argument(
        "--tombstone-threshold",
        type=float,
        default=0.2,
        help="compact when Cassandra's estimated droppable tombstone ratio passes this (default 0.2)",
    )
    parser.add_argument(
        "--cassandra-compaction",
        choices=["compact", "garbagecollect", "off"],
        default="compact",
        help="what to ask Cassandra for over the threshold: compact (default, a major compaction), garbagecollect "
        "(per SSTable, gentler, may need several runs) or off (only report the command)",
    )
    parser.add_argument("--dry-run", action="store_true", help="count what would be dropped; change nothing")
    parser.add_argument("--token-ranges", type=int, default=None, help="token ranges per store (default 2 per core)")
    return parser


def run_compact(args, spark, session, config: CassandraConfig, nodetool: Nodetool | None) -> int:
    options = CompactOptions(
        history_retention_ms=args.history_retention,
        basis=args.basis,
        tombstone_threshold=args.tombstone_threshold,
        cassandra_compaction=args.cassandra_compaction,
        dry_run=args.dry_run,
        token_ranges=args.token_ranges,
    )
    report = compact(spark, session, config, args.store, options, nodetool)
    _write_reports(compact_report.write, report, args.report_dir, "compaction done")
    return EXIT_OK


JOBS = {
    "audit_partitions": (audit_parser, run_audit),
    "compact_state": (compact_parser, run_compact),
    "expire_state": (expire_parser, run_expire),
    "validate_idempotency": (validate_parser, run_validate),
}


def run(job: str, argv: Sequence[str] | None) -> int:
    """Parse `argv` for `job`, run it in a Spark session, map errors to the exit codes."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "great_expectations", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    make_parser, body = JOBS[job]
    args = make_parser().parse_args(argv)
    try:
        config = cfg.from_args(CassandraConfig, args)
        args.kafka = cfg.from_args(KafkaConfig, args) if hasattr(args, "bootstrap_servers") else None
        nodetool = Nodetool.locate(cfg.from_args(NodetoolConfig, args))
        session = session_for(config)
        require_keyspace(session, config.keyspace)
        spark = build_session(f"statestore-{job}", args.spark_master)
        return body(args, spark, session, config, nodetool)
    except MaintenanceCheckError as exc:
        print(f"{job}: {exc}", file=sys.stderr)
        return EXIT_CHECK_FAILED
    except (StateStoreError, ConfigError) as exc:
        print(f"{job}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a job's last resort: report and exit non-zero
        _log.exception("%s failed", job)
        print(f"{job}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
