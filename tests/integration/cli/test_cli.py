"""The CLI against the real stack: produce, get, dump, top, stores, deadletters, and the query
commands (get, range, prefix, all, count, history) over stores of several types and codecs."""

from __future__ import annotations

import csv
import io
import json
import logging
import uuid

import pytest

from statestore.cli.main import main
from statestore.conn.cassandra import DDL_PROFILE
from statestore.core import codecs
from statestore.store.builder import StoreBuilder
from tests.corpus import generate
from tests.integration.conftest import delete_topic, run_stream


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_produce_then_query_every_way(
    capsys, tmp_path, spark, session, keyspace, cassandra_config, kafka_config, store_name
):
    lines, truth = generate(500, seed=21)
    source = tmp_path / "input.txt"
    source.write_bytes("\n".join(lines).encode("utf-8") + b"\n\xff broken line\n")
    topic = f"cli-{store_name}"
    try:
        _check_produce_and_queries(
            capsys,
            tmp_path,
            spark,
            keyspace,
            cassandra_config,
            kafka_config,
            store_name,
            topic,
            source,
            lines,
            truth,
        )
    finally:
        delete_topic(kafka_config, topic)


def _check_produce_and_queries(
    capsys, tmp_path, spark, keyspace, cassandra_config, kafka_config, store_name, topic, source, lines, truth
):
    code, _, err = _run(capsys, "produce", topic, str(source), "--partitions", "3")
    assert code == 0 and f"produced {len(lines) + 1} message(s)" in err

    run_stream(spark, cassandra_config, kafka_config, topic, store_name, tmp_path / "cp")
    ks = ("--keyspace", keyspace)

    code, out, _ = _run(capsys, "dump", store_name, "--format", "csv", *ks)
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["key", "value"]
    assert {k: int(v) for k, v in rows[1:]} == dict(truth)
    assert [k for k, _ in rows[1:]] == sorted(truth)  # sorted by key (UTF-8 byte order)

    code, out, _ = _run(capsys, "dump", store_name, "--format", "jsonl", *ks)
    assert [json.loads(line) for line in out.splitlines()][:2] == [
        {"key": k, "value": truth[k]} for k in sorted(truth)[:2]
    ]

    word, count = truth.most_common(1)[0]
    assert _run(capsys, "get", store_name, word, *ks)[:2] == (0, f"{count}\n")
    code, _, err = _run(capsys, "get", store_name, "absent-word", *ks)
    assert code == 3 and "not in store" in err  # not found

    code, out, _ = _run(capsys, "top", store_name, "-n", "3", "--format", "csv", *ks)
    expected = sorted(truth.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert out.splitlines()[1:] == [f"{k},{v}" for k, v in expected]

    code, out, _ = _run(capsys, "stores", "--format", "jsonl", *ks)
    listed = {json.loads(line)["store"]: json.loads(line) for line in out.splitlines()}
    assert listed[store_name]["partitions"] == 3 and listed[store_name]["topic"] == topic

    code, out, _ = _run(capsys, "deadletters", store_name, "--format", "jsonl", *ks)
    letters = [json.loads(line) for line in out.splitlines()]
    assert [(d["reason"], d["raw_hex"]) for d in letters] == [("invalid_utf8", b"\xff broken line".hex())]


def test_errors_are_one_clear_line(capsys, keyspace):
    code, _, err = _run(capsys, "get", "nosuchstore", "x", "--keyspace", keyspace)
    assert code == 3 and "no store 'nosuchstore'" in err  # not found
    code, _, err = _run(capsys, "dump", "Bad;Name", "--keyspace", keyspace)
    assert code == 2 and "invalid store name" in err  # a usage error, found before connecting
    code, _, err = _run(capsys, "stores", "--cassandra-port", "1", "--keyspace", keyspace)
    assert code == 5 and "cannot reach Cassandra at 127.0.0.1:1" in err  # unavailable
    assert "For the local stack run `make stack-up`" in err  # the make target the docs name
    code, _, err = _run(capsys, "--cassandra-port", "1", "get", "Bad;Name", "x", "--keyspace", keyspace)
    assert code == 2 and "invalid store name" in err and "cannot reach" not in err
    # A keyspace that does not exist is named as such, by every command (not "it holds no stores yet").
    for argv in (["stores"], ["top", "s"], ["get", "s", "x"], ["describe", "s"], ["status", "s", "--no-lag"]):
        code, _, err = _run(capsys, "--keyspace", "it_no_such_keyspace", *argv)
        assert code == 3 and "keyspace 'it_no_such_keyspace' does not exist" in err, (argv, err)


@pytest.fixture(scope="module")
def query_stores(session, keyspace):
    words = (
        StoreBuilder(session, "cli_words").with_keyspace(keyspace).partitioned_key_value_store(partitions=5).create()
    )
    words.put_all([(w, n) for n, w in enumerate(WORDS)])
    ids = (
        StoreBuilder(session, "cli_ids")
        .with_keyspace(keyspace)
        .with_key_codec(codecs.LONG)
        .with_value_codec(codecs.JSON)
        .global_key_value_store()
        .create()
    )
    ids.put_all([(n, {"n": n}) for n in (-3, 0, 1, 2, 300)])
    blobs = (
        StoreBuilder(session, "cli_blobs")
        .with_keyspace(keyspace)
        .with_key_codec(codecs.BYTES)
        .with_value_codec(codecs.BYTES)
        .partitioned_key_value_store(partitions=2)
        .create()
    )
    blobs.put_all([(b"\x00\x01", b"\xff"), (b"\x0a", b"")])
    prices = (
        StoreBuilder(session, "cli_prices").with_keyspace(keyspace).partitioned_versioned_store(partitions=2).create()
    )
    for key, value, at in [("apple", 10, 1000), ("apple", 12, 2000), ("apple", None, 3000), ("pear", 5, 1500)]:
        prices.put(key, value, at)
    return words, ids, blobs


WORDS = ["apple", "apricot", "banana", "berry", "cherry", "é-accent", "日本"]


def _jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_get_in_every_format(capsys, keyspace, query_stores):
    ks = ("--keyspace", keyspace)
    assert _run(capsys, "get", "cli_words", "banana", *ks)[:2] == (0, "2\n")  # the value alone, as before
    assert _run(capsys, "get", "cli_words", "日本", "--format", "csv", *ks)[1] == "key,value\n日本,6\n"
    assert _jsonl(_run(capsys, "get", "cli_ids", "-3", "--format", "jsonl", *ks)[1]) == [
        {"key": -3, "value": {"n": -3}}
    ]
    assert _run(capsys, "get", "cli_ids", "300", *ks)[1] == '{"n":300}\n'
    assert _run(capsys, "get", "cli_blobs", "0001", "--format", "table", *ks)[1] == "key   value\n0001  ff\n"
    code, _, err = _run(capsys, "get", "cli_ids", "three", *ks)
    assert code == 2 and "'three' is not a long key: write a decimal integer" in err
    code, _, err = _run(capsys, "get", "cli_words", "banana", "--as-of", "1000", *ks)
    assert code == 2 and "keeps only each key's latest value, so it has no as-of reads" in err


def test_range_prefix_and_all(capsys, keyspace, query_stores):
    ks = ("--keyspace", keyspace)

    def keys(*argv):
        code, out, err = _run(capsys, *argv, "--format", "jsonl", *ks)
        assert code == 0, err
        return [row["key"] for row in _jsonl(out)]

    assert keys("range", "cli_words", "--from", "apricot", "--to", "cherry") == WORDS[1:5]
    assert keys("range", "cli_words", "--from", "apricot", "--to", "cherry", "--reverse") == WORDS[1:5][::-1]
    assert keys("range", "cli_words", "--from", "c") == WORDS[4:]
    assert keys("range", "cli_words", "--to", "b", "--reverse") == WORDS[:2][::-1]
    assert keys("range", "cli_words", "--from", "z", "--to", "a") == []  # from above to: empty, as in Kafka Streams
    assert keys("prefix", "cli_words", "ap") == ["apple", "apricot"]
    assert keys("all", "cli_words") == WORDS
    assert keys("all", "cli_words", "--reverse", "--limit", "3") == WORDS[::-1][:3]
    # A global store sorts its entries for all(): long keys in byte order, so negatives come last.
    assert keys("all", "cli_ids") == [0, 1, 2, 300, -3]
    assert keys("all", "cli_blobs", "--reverse") == ["0a", "0001"]

    assert _run(capsys, "all", "cli_words", "--limit", "2", *ks)[1].splitlines() == [
        "key      value",
        "apple    0",
        "apricot  1",
    ]
    assert _run(capsys, "prefix", "cli_words", "b", "--format", "csv", *ks)[1] == "key,value\nbanana,2\nberry,3\n"


def test_unsupported_scans_print_the_librarys_message(capsys, keyspace, query_stores):
    ks = ("--keyspace", keyspace)
    for argv in (("range", "cli_ids", "--from", "0", "--to", "5"), ("prefix", "cli_ids", "1")):
        code, out, err = _run(capsys, *argv, *ks)
        assert code == 2 and out == ""
        assert err.startswith("statestore: store 'cli_ids' is a global-kv store: its keys are spread by hash")
    code, _, err = _run(capsys, "history", "cli_words", "apple", *ks)
    assert code == 2 and "store 'cli_words' is a partitioned-kv store and keeps only each key's latest value" in err


def test_versioned_get_and_history(capsys, keyspace, query_stores):
    ks = ("--keyspace", keyspace)
    assert _run(capsys, "get", "cli_prices", "pear", *ks)[:2] == (0, "5\n")
    assert _run(capsys, "get", "cli_prices", "apple", "--as-of", "2500", "--format", "csv", *ks)[1] == (
        "key,value,valid_from,valid_to\napple,12,2000,3000\n"
    )
    code, _, err = _run(capsys, "get", "cli_prices", "apple", *ks)  # deleted at 3000
    assert code == 3 and "'apple' is not in store cli_prices" in err
    code, out, _ = _run(capsys, "history", "cli_prices", "apple", "--format", "jsonl", *ks)
    assert _jsonl(out) == [
        {"valid_from": 1000, "valid_to": 2000, "value": 10},
        {"valid_from": 2000, "valid_to": 3000, "value": 12},
        {"valid_from": 3000, "valid_to": None, "value": None},
    ]
    code, out, _ = _run(capsys, "history", "cli_prices", "apple", "--from", "1500", "--to", "2000", *ks)
    assert out.splitlines() == ["valid_from  valid_to  value", "1000        2000      10"]
    assert _run(capsys, "all", "cli_prices", "--format", "csv", *ks)[1] == "key,value\npear,5\n"


def test_count_is_exact_and_estimates_when_asked(capsys, caplog, keyspace, query_stores):
    ks = ("--keyspace", keyspace)
    with caplog.at_level(logging.WARNING):
        code, out, err = _run(capsys, "count", "cli_words", *ks)
    assert (code, out, err) == (0, f"{len(WORDS)}\n", "")  # a script reads the truth, and no warning
    assert "reads the whole table" not in caplog.text  # asked for by the command's name, not by a setting
    code, out, err = _run(capsys, "count", "cli_words", "--estimate", *ks)
    assert code == 0 and int(out) >= 0 and "approximate: Cassandra's size estimate" in err
    assert _run(capsys, "count", "cli_words", "--exact", *ks)[:2] == (0, f"{len(WORDS)}\n")  # still accepted
    assert _run(capsys, "count", "cli_ids", *ks)[1] == "5\n"
    csv_out = _run(capsys, "count", "cli_ids", "--format", "csv", *ks)[1]
    assert csv_out == "store,entries,exact\ncli_ids,5,true\n"
    code, out, _ = _run(capsys, "count", "cli_ids", "--format", "jsonl", *ks)
    assert json.loads(out) == {"store": "cli_ids", "entries": 5, "exact": True}
    assert _run(capsys, "count", "cli_ids", "--format", "table", *ks)[1].splitlines()[0].split() == [
        "store",
        "entries",
        "exact",
    ]


def test_create_keyspace_with_network_topology_and_bad_input_refused_first(capsys, session):
    keyspace = f"it_nts_{uuid.uuid4().hex[:8]}"
    try:
        # Refused before anything reaches Cassandra: no keyspace appears.
        code, _, err = _run(capsys, "create-keyspace", keyspace, "--strategy", "network", "--dc", "datacenter1")
        assert code == 2 and "DATA_CENTER:FACTOR" in err
        code, _, err = _run(capsys, "create-keyspace", keyspace, "--dc", "datacenter1:1")
        assert code == 2 and "--strategy network" in err
        assert session.cluster.metadata.keyspaces.get(keyspace) is None

        # The local stack's single node is data center datacenter1.
        code, out, _ = _run(capsys, "create-keyspace", keyspace, "--strategy", "network", "--dc", "datacenter1:1")
        assert code == 0 and f"keyspace {keyspace} ready" in out
        row = session.execute(
            "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,)
        ).one()
        assert row.replication["class"].endswith("NetworkTopologyStrategy")
        assert row.replication["datacenter1"] == "1"
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", execution_profile=DDL_PROFILE)


def test_connection_options_before_the_command_and_json_everywhere(capsys, keyspace, query_stores):
    before = _run(capsys, "--keyspace", keyspace, "all", "cli_words", "--format", "json")
    after = _run(capsys, "all", "cli_words", "--format", "json", "--keyspace", keyspace)
    assert before == after and before[0] == 0
    assert [row["key"] for row in json.loads(before[1])] == WORDS
    code, out, _ = _run(capsys, "--keyspace", keyspace, "get", "cli_words", "banana", "--format", "json")
    assert code == 0 and json.loads(out) == [{"key": "banana", "value": 2}]
    code, out, _ = _run(capsys, "--keyspace", keyspace, "history", "cli_prices", "apple", "--format", "json")
    assert code == 0 and [v["value"] for v in json.loads(out)] == [10, 12, None]
    # ISO times and epoch milliseconds name the same bounds.
    iso = _run(
        capsys,
        "history",
        "cli_prices",
        "apple",
        "--from",
        "1970-01-01T00:00:01.500Z",
        "--to",
        "1970-01-01T00:00:02Z",
        *("--keyspace", keyspace),
    )
    assert iso[1].splitlines() == ["valid_from  valid_to  value", "1000        2000      10"]


def test_count_says_about_when_it_estimates(capsys, keyspace, query_stores):
    ks = ("--keyspace", keyspace)
    code, out, err = _run(capsys, "count", "cli_words", "--estimate", "--format", "table", *ks)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["store", "entries", "exact"]
    assert lines[1].split()[1] == "about" and "without --estimate" in out and err == ""
    code, out, _ = _run(capsys, "count", "cli_words", "--estimate", "--format", "json", *ks)
    found = json.loads(out)
    assert code == 0 and isinstance(found["entries"], int) and found["estimate"] is True and found["exact"] is False
    code, out, _ = _run(capsys, "count", "cli_words", "--format", "json", *ks)
    assert json.loads(out) == {"store": "cli_words", "entries": len(WORDS), "exact": True, "estimate": False}
    code, out, _ = _run(capsys, "count", "cli_words", "--format", "table", *ks)
    assert out.splitlines()[1].split() == ["cli_words", str(len(WORDS)), "true"] and "about" not in out


def test_describe_as_table_and_json(capsys, keyspace, query_stores):
    ks = ("--keyspace", keyspace)
    code, out, _ = _run(capsys, "describe", "cli_words", "--format", "json", "--count-partitions", *ks)
    found = json.loads(out)
    assert code == 0 and found["store"] == "cli_words" and found["type"] == "partitioned-kv"
    assert found["partitions"] == 5 and sum(found["entries_per_partition"]) == len(WORDS)
    assert found["size_nodes_answered"] >= 1 and found["size_nodes_total"] >= found["size_nodes_answered"]
    assert found["table_options"]["compaction"] and found["writer"] is None
    code, out, _ = _run(capsys, "--keyspace", keyspace, "describe", "cli_ids")
    table = dict(line.split("  ", 1) for line in out.splitlines())
    assert code == 0 and table["store"].strip() == f"cli_ids (global-kv, keyspace {keyspace})"
    assert "node(s)" in table["size"] and "key long, value json" in table["codecs"]
    # The store's partitions and Cassandra's are told apart (a global store: 1, and a size estimate).
    assert table["store partitions"].strip() == "1" and "partitions" not in table
    assert "Cassandra partitions" in table["size"] or "no estimate yet" in table["size"]
    code, out, _ = _run(capsys, "describe", "cli_words", "--format", "csv", *ks)
    rows = list(csv.reader(io.StringIO(out)))
    assert code == 0 and len(rows) == 2 and dict(zip(*rows, strict=True))["partitions"] == "5"
    assert table["writer"].strip().startswith("none")
    code, _, err = _run(capsys, "describe", "nosuchstore", *ks)
    assert code == 3 and "no store 'nosuchstore'" in err
