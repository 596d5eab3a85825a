"""The livestate data source's options (statestore.dataframe.options): pure parsing."""

from __future__ import annotations

import pytest

from statestore.core.errors import ConfigError, OptionError
from statestore.dataframe.options import DEFAULT_SPLITS, cassandra_config, parse_instant, read_options


def test_the_store_and_the_defaults():
    options = read_options({"store": "sample"})
    assert (options.store, options.as_of, options.every_version) == ("sample", None, False)
    assert options.splits == DEFAULT_SPLITS and options.page_size == 5000 and options.pushdown is False
    assert read_options({"path": "sample"}).store == "sample"  # .load("sample")


def test_options_are_read_whatever_their_case():
    options = read_options({"Store": "s", "ASOF": "1000", "Splits": "3", "PageSize": "100", "PushDown": "true"})
    assert (options.as_of, options.splits, options.page_size, options.pushdown) == (1000, 3, 100, True)
    assert read_options({"store": "s", "versions": "ALL"}).every_version


@pytest.mark.parametrize(
    "given, message",
    [
        ({}, "name the store"),
        ({"store": "Bad-Name"}, "store name"),
        ({"store": "s", "spilts": "4"}, "unknown option.*spilts"),
        ({"store": "s", "splits": "0"}, "splits"),
        ({"store": "s", "pageSize": "many"}, "pageSize"),
        ({"store": "s", "versions": "some"}, "versions"),
        ({"store": "s", "asOf": "yesterday"}, "not a time"),
        ({"store": "s", "asOf": "5", "versions": "all"}, "not both"),
        ({"store": "s", "pushdown": "maybe"}, "pushdown"),
    ],
)
def test_bad_options_are_named(given, message):
    with pytest.raises((OptionError, ValueError), match=message):
        read_options(given)


def test_instants_in_epoch_ms_or_iso_8601():
    assert parse_instant("1764201600000", "asOf") == 1_764_201_600_000
    assert parse_instant("2025-11-27T00:00:00Z", "asOf") == 1_764_201_600_000
    assert parse_instant("2025-11-27T00:00:00", "asOf") == 1_764_201_600_000  # no zone: UTC
    assert parse_instant("2025-11-27T01:00:00.250+01:00", "asOf") == 1_764_201_600_250


def test_cassandra_settings_come_from_the_cli_chain_options_over_it():
    env = {"STATESTORE_KEYSPACE": "from_env", "STATESTORE_CASSANDRA_PORT": "9142"}
    config = cassandra_config({"store": "s", "cassandra-hosts": "10.0.0.1,10.0.0.2"}, env)
    assert (config.keyspace, config.port, config.hosts) == ("from_env", 9142, ("10.0.0.1", "10.0.0.2"))
    config = cassandra_config({"keyspace": "given", "local_dc": "dc2"}, env)
    assert (config.keyspace, config.local_dc) == ("given", "dc2")
    with pytest.raises(ConfigError, match="--cassandra-port"):
        cassandra_config({"port": "nope"}, {})
