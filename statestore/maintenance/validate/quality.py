"""A Great Expectations suite over a word-count or aggregate store's content, with Data Docs.

Called from our own code (not Airflow's GX provider, which cannot install beside Airflow
3.3 and builds its DataFrame at DAG-parse time). The context is ephemeral: the suite is
defined here each run, and its results are rendered as Data Docs under
`<report-dir>/data_docs/` (open index.html).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path

_log = logging.getLogger("statestore.maintenance.validate.quality")
DOCS_DIR = "data_docs"


@dataclass
class QualityResult:
    passed: bool
    suite: str
    expectations: list[dict] = field(default_factory=list)
    data_docs: str | None = None


def expectations(
    columns: list[str],
    words_at_least: int,
    input_words: int,
    last_batch_id: int | None,
    unique: tuple[str, ...] = ("key",),
) -> list:
    """The suite: the expected columns; keys present, non-empty and unique (with their window
    or session bounds in window and session stores: `unique`); counts at least 1
    and summing to the recounted number of words (a range once expiry removed entries); every
    entry written by a batch the registry knows."""
    # Great Expectations is the optional `maintenance` extra: imported only by the validate job.
    import great_expectations as gx

    e = gx.expectations
    suite = [
        e.ExpectTableColumnsToMatchSet(column_set=columns, exact_match=True),
        e.ExpectColumnValuesToNotBeNull(column="key"),
        e.ExpectColumnValueLengthsToBeBetween(column="key", min_value=1),
        e.ExpectColumnValuesToBeUnique(column="key")
        if unique == ("key",)
        else e.ExpectCompoundColumnsToBeUnique(column_list=list(unique)),
        e.ExpectColumnValuesToNotBeNull(column="value"),
        e.ExpectColumnValuesToBeBetween(column="value", min_value=1),
        e.ExpectColumnSumToBeBetween(column="value", min_value=words_at_least, max_value=input_words),
    ]
    if last_batch_id is not None:
        suite.append(e.ExpectColumnValuesToBeBetween(column="batch_id", min_value=0, max_value=last_batch_id))
    return suite


def aggregate_expectations(
    columns: list[str], last_batch_id: int | None, measures: str, unique: tuple[str, ...] = ("key",)
) -> list:
    """The suite of an aggregate store's entries (key, batch_id, time, problems; a window store's
    with window_start): keys present, non-empty and unique (a window store's: with their window
    start, `unique`); no entry (window) with problems, which AggregateSpec.problems finds per entry
    (its measures' own checks and min <= max: the rules live there alone, `measures` names them
    in the expectation's description); every entry written by a batch the registry knows."""
    import great_expectations as gx

    e = gx.expectations
    suite = [
        e.ExpectTableColumnsToMatchSet(column_set=columns, exact_match=True),
        e.ExpectColumnValuesToNotBeNull(column="key"),
        e.ExpectColumnValueLengthsToBeBetween(column="key", min_value=1),
        e.ExpectColumnValuesToBeUnique(column="key")
        if unique == ("key",)
        else e.ExpectCompoundColumnsToBeUnique(column_list=list(unique)),
        e.ExpectColumnValuesToBeNull(
            column="problems", description=f"AggregateSpec.problems finds nothing in any entry: {measures}"
        ),
    ]
    if last_batch_id is not None:
        suite.append(e.ExpectColumnValuesToBeBetween(column="batch_id", min_value=0, max_value=last_batch_id))
    return suite


def _quiet_progress(context) -> None:
    """GX draws its own progress bars; keep them to terminals."""
    if sys.stderr.isatty():
        return
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)


def run_suite(
    spark, frame, spec, progress, recount, report_dir: Path, unique: tuple[str, ...] = ("key",), aggregate=None
) -> QualityResult:
    """Validate `frame` (the store's rows; an aggregate store's, with their `aggregate`
    measures: idempotency.aggregate_entries) and write Data Docs; returns each expectation's
    outcome."""
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction

    docs = (report_dir / DOCS_DIR).resolve()
    context = gx.get_context(mode="ephemeral")
    _quiet_progress(context)
    context.add_data_docs_site(
        site_name="statestore",
        site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    name = f"{spec.keyspace}.{spec.name}"
    batch = (
        context.data_sources.add_spark(name="statestore")
        .add_dataframe_asset(name=name)
        .add_batch_definition_whole_dataframe("whole store")
    )
    suite = context.suites.add(gx.ExpectationSuite(name=f"{name} content"))
    if aggregate is None:
        recounted = (recount.words_at_least, recount.input_words, progress.last_batch_id)
        suite_expectations = expectations(frame.columns, *recounted, unique)
    else:
        measures = ", ".join(f"{m.name} ({m.kind})" for m in aggregate.measures)
        suite_expectations = aggregate_expectations(frame.columns, progress.last_batch_id, measures, unique)
    for expectation in suite_expectations:
        suite.add_expectation(expectation)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"{name} validation", data=batch, suite=suite)
    )
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(
            name=f"{name} checkpoint",
            validation_definitions=[definition],
            actions=[UpdateDataDocsAction(name="data docs", site_names=["statestore"])],
        )
    )
    result = checkpoint.run(batch_parameters={"dataframe": frame})
    outcomes = []
    for run in result.run_results.values():
        for outcome in run.results:
            config = outcome.expectation_config
            details = outcome.result or {}
            outcomes.append(
                {
                    "expectation": config.type,
                    "column": config.kwargs.get("column"),
                    "success": bool(outcome.success),
                    "observed": details.get("observed_value"),
                    "unexpected": details.get("unexpected_count"),
                    "examples": details.get("partial_unexpected_list", [])[:10],
                }
            )
    index = docs / "index.html"
    _log.info(
        "Great Expectations on store %s: %s; Data Docs: %s", name, "passed" if result.success else "failed", index
    )
    return QualityResult(bool(result.success), suite.name, outcomes, str(index.relative_to(report_dir.resolve())))
