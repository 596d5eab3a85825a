"""How every node's figures combine into the cluster's (pure), and nodetool on every node."""

from __future__ import annotations

import pytest

from statestore.core.errors import NodetoolError
from statestore.maintenance.shared.node_figures import EveryNode, combine_percentiles, combine_tablestats
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.store.table_stats import NodeFigures, combine

NODE = {
    "number_of_partitions_estimate": 1000,
    "compacted_partition_maximum_bytes": 2000,
    "space_used_live": "500",
    "sstable_count": 2,
    "memtable_cell_count": 10,
    "droppable_tombstone_ratio": 0.1,
}


def test_primary_range_estimates_add_up_and_the_largest_partition_is_the_largest_anywhere():
    answers = [NodeFigures("a", 100, 100 * 40, 2), NodeFigures("b", 300, 300 * 20, None), NodeFigures("c", 0, 0, 5)]
    figures = combine(answers, nodes_total=4, failed=("d",))
    assert figures.size.partitions == 400 and figures.size.mean_partition_bytes == (4000 + 6000) // 400
    assert figures.max_partition_mib == 5
    assert (figures.nodes_answered, figures.nodes_total, figures.nodes_failed, figures.complete) == (
        3,
        4,
        ("d",),
        False,
    )
    assert combine([], 3).size is None and combine([], 3).nodes_answered == 0


def test_tablestats_of_every_replica_divide_by_the_replication_and_keep_the_worst():
    other = {**NODE, "compacted_partition_maximum_bytes": 9000, "droppable_tombstone_ratio": 0.4}
    combined = combine_tablestats([NODE, NODE, other], replication=3)
    assert combined["number_of_partitions_estimate"] == 1000  # three replicas of the same 1000
    assert combined["compacted_partition_maximum_bytes"] == 9000
    assert (combined["space_used_live"], combined["sstable_count"]) == (1500, 6)
    assert combined["droppable_tombstone_ratio"] == 0.4
    # Two of three answering with RF 3: each holds everything, so divide by 2, not 3.
    assert combine_tablestats([NODE, NODE], replication=3)["number_of_partitions_estimate"] == 1000
    assert combine_tablestats([NODE, NODE], replication=1)["number_of_partitions_estimate"] == 2000


def test_percentiles_take_the_largest_value_of_each_label():
    assert combine_percentiles([{"50%": 10, "Max": 100}, {"50%": 30, "Max": 50}]) == {"50%": 30, "Max": 100}


class _Fake:
    def __init__(self, fails: bool) -> None:
        self.fails, self.calls = fails, []

    def tablestats_of(self, tables):
        self.calls.append("tablestats")
        if self.fails:
            raise NodetoolError("connection refused")
        return {t: NODE for t in tables}

    def flush(self, keyspace, *tables):
        self.calls.append("flush")
        if self.fails:
            raise NodetoolError("connection refused")

    def describe(self):
        return "nodetool"


def test_every_node_is_asked_a_failing_one_is_named_and_all_failing_raises():
    up, down = _Fake(False), _Fake(True)
    every = EveryNode([("n1:7299", up), ("n2:7300", down), ("n3:7301", _Fake(False))])
    stats = every.tablestats_of([("ks", "t")], replication=3)
    assert stats[("ks", "t")]["number_of_partitions_estimate"] == 1000
    assert (every.answered, every.failed) == (2, ["n2:7300"])
    every.flush("ks", "t")
    assert up.calls == ["tablestats", "flush"] and down.calls == ["tablestats", "flush"]
    assert every.failed == ["n2:7300"]  # still named after the flush it failed
    with pytest.raises(NodetoolError, match="connection refused"):
        EveryNode([("n2:7300", _Fake(True))]).tablestats_of([("ks", "t")])


def test_nodetool_hosts_give_one_nodetool_per_node_and_bad_entries_are_refused():
    from statestore.core import config as cfg
    from statestore.core.errors import ConfigError

    config = cfg.resolve(
        NodetoolConfig,
        env={"STATESTORE_NODETOOL": "/opt/nodetool", "STATESTORE_NODETOOL_HOSTS": "10.0.0.1:7199,10.0.0.2:7200"},
    )
    every = Nodetool.locate(config)
    assert [name for name, _ in every.tools] == ["10.0.0.1:7199", "10.0.0.2:7200"]
    assert every.tools[1][1].argv == ["/opt/nodetool", "-h", "10.0.0.2", "-p", "7200"]
    with pytest.raises(ConfigError, match="host:port"):
        cfg.resolve(NodetoolConfig, env={"STATESTORE_NODETOOL_HOSTS": "10.0.0.1"})


def test_every_maintenance_job_keeps_cassandra_hosts_and_nodetool_hosts_apart():
    # They once shared one argparse dest: --cassandra-hosts 127.0.0.1 became the nodetool host list.
    from statestore.core import config as cfg
    from statestore.core.config import CassandraConfig
    from statestore.maintenance import main as maintenance_main

    for build in (
        maintenance_main.audit_parser,
        maintenance_main.expire_parser,
        maintenance_main.validate_parser,
        maintenance_main.compact_parser,
    ):
        parser = build()
        required = {"--report-dir": "/tmp/r", "--store": "s", "--retention": "1d", "--checkpoint": "/tmp/c"}
        known = {a for action in parser._actions for a in action.option_strings}
        argv = [x for flag, value in required.items() if flag in known for x in (flag, value)]
        args, _ = parser.parse_known_args([*argv, "--cassandra-hosts", "10.0.0.9"])
        assert cfg.from_args(CassandraConfig, args, env={}).hosts == ("10.0.0.9",)
        assert cfg.from_args(NodetoolConfig, args, env={}).jmx_hosts is None
        args, _ = parser.parse_known_args([*argv, "--nodetool-hosts", "10.0.0.1:7199"])
        assert cfg.from_args(NodetoolConfig, args, env={}).jmx_hosts == "10.0.0.1:7199"
