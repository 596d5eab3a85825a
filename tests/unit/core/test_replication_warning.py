"""`statestore create-keyspace` warns when the replication it is asked for does not fit the
nodes the driver sees: fewer replicas than the cluster could give (up to 3: a lost node then loses
data, and a quorum needs every replica), or more replicas than a data center has nodes (a quorum
can never be reached). The rule, pure; the CLI's use of it on the real stack is in
tests/integration/cli/test_create_keyspace.py."""

from __future__ import annotations

import pytest

from statestore.core.model import Replication


@pytest.mark.parametrize(
    ("factor", "nodes"),
    [(1, {"dc1": 1}), (3, {"dc1": 3}), (3, {"dc1": 6}), (3, {"dc1": 2, "dc2": 2}), (2, {"dc1": 2})],
)
def test_a_simple_factor_that_fits_says_nothing(factor, nodes):
    assert Replication(replication_factor=factor).warning(nodes) is None


def test_the_default_factor_on_three_nodes_is_named():
    warning = Replication().warning({"datacenter1": 3})
    assert warning is not None
    assert "replication factor 1" in warning and "3 nodes" in warning
    assert "--replication-factor 3" in warning


def test_a_factor_of_two_on_five_nodes_is_named():
    assert "--replication-factor 3" in Replication(replication_factor=2).warning({"dc1": 5})


def test_a_factor_above_the_nodes_is_named():
    warning = Replication(replication_factor=2).warning({"datacenter1": 1})
    assert "replication factor 2" in warning and "1 node" in warning and "quorum" in warning


def test_each_data_center_is_checked_on_its_own():
    assert Replication.network(["dc1:3", "dc2:3"]).warning({"dc1": 3, "dc2": 4}) is None
    warning = Replication.network(["dc1:3", "dc2:1"]).warning({"dc1": 3, "dc2": 3})
    assert "data center dc2" in warning and "dc2:3" in warning and "dc1" not in warning.replace("dc1:3", "")
    assert "data center dc3" in Replication.network(["dc3:3"]).warning({"dc1": 3})


def test_no_node_seen_says_nothing():
    assert Replication().warning({}) is None
