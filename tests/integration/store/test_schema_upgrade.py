"""Stores made by a release before schema versions (tests/fixtures/schema_v1: a key-value, a window
and a session store, their registry, stream log, dead-letter tables and Spark checkpoints, as
f313faf left them after counting corpus.OLD) are refused by this release's stream before it
writes anything, migrated by `statestore migrate`, and then counted on from their own
checkpoints: every count exactly the old lines' plus the new lines'. A store a newer release
migrated is refused too."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from statestore.cli.main import main as cli
from statestore.conn import kafka as kafka_io
from statestore.conn.cassandra import DDL_PROFILE, create_keyspace
from statestore.core.errors import StoreSchemaError
from statestore.store.book import registry, schema
from statestore.store.book.lease import StoreLease
from statestore.store.builder import open_session_store, open_window_store
from tests.integration.conftest import delete_topic, dump, run_stream

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "schema_v1"
sys.path.insert(0, str(FIXTURE))
import corpus  # noqa: E402

OLD_KEYSPACE, OLD_TOPIC = "upgrade_v1", "upgrade-v1-words"
SETTINGS = {
    "upgrade_kv": {},
    "upgrade_win": {"window": corpus.WINDOW_MS, "grace": corpus.GRACE_MS, "retention": corpus.RETENTION_MS},
    "upgrade_sess": {"session_gap": corpus.GAP_MS, "grace": corpus.GRACE_MS, "retention": corpus.RETENTION_MS},
}


@pytest.fixture
def old_release(session, kafka_config, tmp_path):
    """The fixture in a keyspace and topic of its own: (keyspace, topic, checkpoint folder)."""
    keyspace, topic = f"up_{uuid.uuid4().hex[:10]}", f"upgrade-v1-{uuid.uuid4().hex[:8]}"
    create_keyspace(session, keyspace)
    kafka_io.ensure_topic(kafka_config, topic, corpus.PARTITIONS)
    corpus.produce(kafka_config.bootstrap_servers, topic, corpus.OLD)  # at the offsets the fixture recorded
    for table in json.loads((FIXTURE / "keyspace.json").read_text()):
        session.execute(table["create"].replace(f"{OLD_KEYSPACE}.", f"{keyspace}."), execution_profile=DDL_PROFILE)
        for row in table["rows"]:
            stamp = "" if row["ts"] is None else f" USING TIMESTAMP {int(row['ts'])}"
            session.execute(
                f"INSERT INTO {keyspace}.{table['name']} JSON %s DEFAULT UNSET{stamp}",
                (row["json"].replace(OLD_TOPIC, topic),),
            )
    # The checkpoints name the topic: copied with the new name, without Hadoop's checksum files.
    for source in (FIXTURE / "checkpoints").rglob("*"):
        target = tmp_path / "checkpoints" / source.relative_to(FIXTURE / "checkpoints")
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not source.name.endswith(".crc"):
            target.write_bytes(source.read_bytes().replace(OLD_TOPIC.encode(), topic.encode()))
    yield keyspace, topic, tmp_path / "checkpoints"
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE, timeout=60)
    delete_topic(kafka_config, topic)
    shutil.rmtree(tmp_path / "checkpoints", ignore_errors=True)


def _stream(spark, cassandra_config, kafka_config, keyspace, topic, checkpoints, store):
    config = replace(cassandra_config, keyspace=keyspace)
    run_stream(spark, config, kafka_config, topic, store, checkpoints / store, **SETTINGS[store])


def _windows(session, keyspace) -> Counter:
    return Counter({(w.key, w.start_ms): w.value for w in open_window_store(session, keyspace, "upgrade_win").all()})


def _sessions(session, keyspace) -> dict:
    found: dict = {}
    for s in open_session_store(session, keyspace, "upgrade_sess").all():
        found.setdefault(s.key, []).append((s.start_ms, s.end_ms, s.value))
    return {word: sorted(runs) for word, runs in found.items()}


def test_an_old_release_store_is_refused_then_migrated_and_counted_on_exactly(
    spark, session, cassandra_config, kafka_config, old_release, capsys
):
    keyspace, topic, checkpoints = old_release
    assert dump(session, keyspace, "upgrade_kv") == corpus.counts(corpus.OLD)  # as the old release left it
    assert _windows(session, keyspace) == corpus.window_counts(corpus.OLD)
    assert _sessions(session, keyspace) == corpus.session_counts(corpus.OLD)
    corpus.produce(kafka_config.bootstrap_servers, topic, corpus.NEW)

    for store in SETTINGS:
        with pytest.raises(StoreSchemaError, match=rf"schema version 1 .*`statestore migrate {store}`"):
            _stream(spark, cassandra_config, kafka_config, keyspace, topic, checkpoints, store)
    assert dump(session, keyspace, "upgrade_kv") == corpus.counts(corpus.OLD)  # refused before any write
    assert registry.progress(session, keyspace, "upgrade_kv").last_batch_id == 0

    assert cli(["migrate", "--keyspace", keyspace]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == ["store upgrade_kv", "store upgrade_sess", "store upgrade_win"]
    assert (
        f"schema 1 -> {schema.SCHEMA_VERSION} (added statestore_stores.topic_id, statestore_stores.subpartitions"
        in printed[0]
    )
    assert all(schema.stored_version(session, keyspace, store) == schema.SCHEMA_VERSION for store in SETTINGS)

    for store in SETTINGS:
        _stream(spark, cassandra_config, kafka_config, keyspace, topic, checkpoints, store)
    both = corpus.OLD + corpus.NEW
    assert dump(session, keyspace, "upgrade_kv") == corpus.counts(both)
    assert _windows(session, keyspace) == corpus.window_counts(both)
    sessions = _sessions(session, keyspace)
    assert sessions == corpus.session_counts(both)
    # The new lines began within the gap of the old ones: some old session took new events.
    old = corpus.session_counts(corpus.OLD)
    assert any(s[0] <= old[w][-1][1] and s[1] >= old[w][-1][0] and s != old[w][-1] for w in old for s in sessions[w])

    assert cli(["migrate", "upgrade_kv", "--keyspace", keyspace]) == 0  # again: nothing to do
    assert capsys.readouterr().out.strip() == f"store upgrade_kv: schema {schema.SCHEMA_VERSION}, up to date"


def test_a_store_a_newer_release_migrated_is_refused(spark, session, cassandra_config, kafka_config, old_release):
    keyspace, topic, checkpoints = old_release
    assert cli(["migrate", "upgrade_kv", "--keyspace", keyspace]) == 0
    registry.record_schema_version(session, keyspace, "upgrade_kv", schema.SCHEMA_VERSION + 1)
    corpus.produce(kafka_config.bootstrap_servers, topic, corpus.NEW)
    with pytest.raises(
        StoreSchemaError, match=rf"newer than this release's {schema.SCHEMA_VERSION} .*upgrade statestore"
    ):
        _stream(spark, cassandra_config, kafka_config, keyspace, topic, checkpoints, "upgrade_kv")
    assert dump(session, keyspace, "upgrade_kv") == corpus.counts(corpus.OLD)
    assert cli(["migrate", "upgrade_kv", "--keyspace", keyspace]) == 4  # refused: exit 4


def test_a_migration_is_refused_while_a_stream_holds_the_store(session, old_release, capsys):
    keyspace, _, _ = old_release
    writer = StoreLease(session, keyspace, "upgrade_kv", "/checkpoints/of/a/running/stream", 60)
    writer.acquire()
    try:
        assert cli(["migrate", "upgrade_kv", "--keyspace", keyspace]) == 4
        assert "being written by" in capsys.readouterr().err
        assert schema.stored_version(session, keyspace, "upgrade_kv") == 1
    finally:
        writer.release()
    assert cli(["migrate", "upgrade_kv", "--keyspace", keyspace]) == 0
    assert schema.stored_version(session, keyspace, "upgrade_kv") == schema.SCHEMA_VERSION
