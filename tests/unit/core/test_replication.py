"""Keyspace replication settings (statestore.core.model.Replication): the CQL they make and the
input they refuse, before anything reaches Cassandra."""

import pytest

from statestore.core.errors import OptionError
from statestore.core.model import Replication


def test_simple_strategy_is_the_default():
    assert Replication().cql() == "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    assert Replication(replication_factor=3).cql() == "{'class': 'SimpleStrategy', 'replication_factor': 3}"


def test_network_topology_with_a_factor_per_data_center():
    replication = Replication.network(["dc1:3", "dc-2:2"])
    assert replication.data_centers == (("dc1", 3), ("dc-2", 2))
    assert replication.cql() == "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc-2': 2}"


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ([], "at least one data center"),
        (["dc1"], "DATA_CENTER:FACTOR"),
        (["dc1:three"], "DATA_CENTER:FACTOR"),
        (["dc1:0"], "at least 1"),
        (["dc1:3", "dc1:2"], "named twice"),
        (["dc'1:3"], "data center name"),
        (["dc 1:3"], "data center name"),
    ],
)
def test_bad_data_centers_are_refused_with_the_fix(specs, message):
    with pytest.raises(OptionError, match=message):
        Replication.network(specs)


def test_a_factor_below_one_is_refused():
    with pytest.raises(OptionError, match="at least 1"):
        Replication(replication_factor=0)
