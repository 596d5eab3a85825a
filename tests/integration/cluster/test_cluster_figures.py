"""Sizes and partition figures on the cluster gather every node's view (each node knows only
its own ranges and replicas) and say how many nodes answered."""

from __future__ import annotations

import dataclasses

from statestore.conn.retry import with_retries
from statestore.core import config as cfg
from statestore.maintenance.shared.crosscheck import figures_of
from statestore.maintenance.shared.nodetool import Nodetool, NodetoolConfig
from statestore.store import admin
from statestore.store.book import registry
from statestore.store.builder import open_store
from statestore.store.table_stats import cluster_figures, node_figures

KEYS = 6_000


def test_sizes_sum_every_node_and_name_a_node_down(restore_cluster, cluster_env, cluster_cassandra, cluster_session,
                                                   cluster_keyspace, store_name):  # fmt: skip
    cluster = restore_cluster
    admin.create_store(cluster_session, cluster_keyspace, store_name, "global-kv")
    store = open_store(cluster_session, cluster_keyspace, store_name)
    # Setup, safe to repeat: a loaded cluster may time a write out (put_all does not retry).
    with_retries(cluster_cassandra, "writing the keys", lambda: store.put_all((f"key{i}", i) for i in range(KEYS)))
    spec = registry.lookup(cluster_session, cluster_keyspace, store_name)
    nodetool_config = cfg.resolve(NodetoolConfig, env=cluster_env)
    every = Nodetool.locate(nodetool_config)
    assert len(every.tools) == 3
    every.flush(cluster_keyspace, spec.table)
    every.run("refreshsizeestimates")

    figures = cluster_figures(cluster_session, cluster_keyspace, spec.table)
    assert (figures.nodes_answered, figures.nodes_total) == (3, 3)
    # A global-kv key is a partition: the estimate is of the order of the keys written...
    assert KEYS / 2 < figures.size.partitions < KEYS * 2, figures
    # ... where any one node's own view covers only its primary ranges, about a third.
    hosts = list(cluster_session.cluster.metadata.all_hosts())
    alone = [node_figures(cluster_session, cluster_keyspace, spec.table, host).partitions for host in hosts]
    assert sum(alone) == figures.size.partitions and max(alone) < figures.size.partitions * 0.8

    # nodetool on every node: the replicas' partitions divided by RF 3 is the table's again.
    crosscheck = figures_of(cluster_session, [spec], every, percentiles=True)[0]
    assert crosscheck.nodetool_nodes == "3 of 3" and crosscheck.nodetool_error is None
    assert KEYS / 2 < crosscheck.nodetool_partitions < KEYS * 2, crosscheck
    one_node = Nodetool.locate(
        dataclasses.replace(nodetool_config, jmx_hosts=None, jmx_host="127.0.0.1", jmx_port=7299)
    )
    assert one_node.tablestats(cluster_keyspace, spec.table)["number_of_partitions_estimate"] > 0

    cluster.stop("cassandra-3", kill=True)
    down = cluster_figures(cluster_session, cluster_keyspace, spec.table)
    assert (down.nodes_answered, down.nodes_total, down.nodes_failed) == (2, 3, ("127.0.0.3:9142",))
    described = admin.describe_store(cluster_session, cluster_keyspace, store_name).as_dict()
    assert (described["size_nodes_answered"], described["size_nodes_total"]) == (2, 3)
    without = figures_of(cluster_session, [spec], every, percentiles=False)[0]
    assert without.nodetool_nodes == "2 of 3 (failed: 127.0.0.1:7301)"
    assert (without.nodes_answered, without.nodes_total) == (2, 3)
