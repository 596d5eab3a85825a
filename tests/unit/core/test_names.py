import pytest

from statestore.core.errors import InvalidNameError
from statestore.core.names import deadletter_table, store_table, validate_keyspace, validate_store_name, validate_topic


@pytest.mark.parametrize("name", ["wordcount", "a", "s_1", "x" * 32])
def test_valid_store_names(name):
    assert validate_store_name(name) == name
    assert store_table(name) == f"{name}_store"
    assert deadletter_table(name) == f"{name}_deadletters"
    assert len(deadletter_table(name)) <= 48


@pytest.mark.parametrize(
    "name",
    ["", "1abc", "Word", "a-b", "a b", "x" * 33, "a;DROP TABLE x", "a'--", 'a"b', "é", None, 42],
)
def test_unsafe_store_names_are_rejected_with_the_rule(name):
    with pytest.raises(InvalidNameError, match="lower-case ASCII letters"):
        validate_store_name(name)


@pytest.mark.parametrize("name", ["ks", "k_1", "x" * 48])
def test_valid_keyspaces(name):
    assert validate_keyspace(name) == name


@pytest.mark.parametrize("name", ["", "1k", "K", "k.s", "x" * 49, "ks; DROP KEYSPACE x"])
def test_bad_keyspaces(name):
    with pytest.raises(InvalidNameError, match="keyspace"):
        validate_keyspace(name)


@pytest.mark.parametrize("name", ["lines", "a.b-c_D", "x" * 249])
def test_valid_topics(name):
    assert validate_topic(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "a/b", "x" * 250, "tópico"])
def test_bad_topics(name):
    with pytest.raises(InvalidNameError, match="Kafka topic"):
        validate_topic(name)
