"""The CLI against the real stack: produce, get, dump, top, stores, deadletters."""

from __future__ import annotations

import csv
import io
import json

from statestore.cli import main
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
    assert code == 1 and "not in store" in err

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
    assert code == 2 and "no store 'nosuchstore'" in err
    code, _, err = _run(capsys, "dump", "Bad;Name", "--keyspace", keyspace)
    assert code == 2 and "invalid store name" in err
    code, _, err = _run(capsys, "stores", "--cassandra-port", "1", "--keyspace", keyspace)
    assert code == 2 and "cannot reach Cassandra at 127.0.0.1:1" in err
