"""The input settings a store records (registry input_spec): how JSON records are keyed and
timed. A job with other settings is refused naming both, a new store (or one made before the
settings were recorded) takes the job's, and a store's recovery reads its records with them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from statestore.core import config as cfg
from statestore.core.config import StreamConfig
from statestore.core.errors import StoreMismatchError, StoreNotFoundError
from statestore.core.model import StoreSpec
from statestore.store.book import registry
from statestore.store.book.registry import InputSettings
from statestore.stream.batches import stored_json_input
from statestore.stream.job import _refuse_other_input, input_settings_of

MEASURES = "aggregate:n=count(), total=sum_int(amount)"
BASE = {"topic": "t", "store": "s", "checkpoint": "/tmp/cp"}


def _stream(**overrides) -> StreamConfig:
    return cfg.resolve(StreamConfig, env={}, overrides={**BASE, **overrides})


def _json(**overrides) -> StreamConfig:
    return _stream(input_format="json", aggregate="n=count(), total=sum_int(amount)", **overrides)


def test_the_settings_round_trip_through_the_registrys_json_and_text_lines_record_none():
    settings = input_settings_of(_json(key="shop, user.id", time_field="ts"))
    assert settings == InputSettings("json", ("shop", "user.id"), None, "ts")
    assert InputSettings.parse_stored(settings.as_json()) == settings
    expr = input_settings_of(_json(key_expr="concat(record:a::string, '/', record:b::string)"))
    assert InputSettings.parse_stored(expr.as_json()) == expr and expr.time_field is None
    assert input_settings_of(_stream()) is None  # the word count: null, as every earlier store
    assert InputSettings.parse_stored(None) is None and InputSettings.parse_stored("") is None


def test_a_job_with_another_key_or_time_field_is_refused_naming_both():
    recorded = input_settings_of(_json(key="shop", time_field="ts"))
    for other, named in (
        (_json(key="user", time_field="ts"), "--key user"),
        (_json(key="shop"), "the Kafka timestamp"),
        (_json(key_expr="record:shop::string", time_field="ts"), "--key-expr 'record:shop::string'"),
    ):
        with pytest.raises(StoreMismatchError, match="Nothing was written") as refused:
            _refuse_other_input("agg", recorded, input_settings_of(other))
        assert "--key shop, --time-field ts" in str(refused.value) and named in str(refused.value)
    _refuse_other_input("agg", recorded, input_settings_of(_json(key="shop", time_field="ts")))  # the same
    _refuse_other_input("agg", None, recorded)  # none recorded: the store takes the job's


class _Session:
    """Answers the registry's conditional update as Cassandra would: applied, or not with the
    input_spec the row holds."""

    def __init__(self, held: str | None, applied: bool):
        self.held, self.applied, self.cql = held, applied, []
        self.cluster = SimpleNamespace(profile_manager=SimpleNamespace(profiles={}))

    def prepare(self, cql):
        self.cql.append(cql)
        return SimpleNamespace(cql=cql)

    def execute(self, statement, params=None, execution_profile=None):
        row = SimpleNamespace(applied=self.applied, input_spec=self.held)
        return SimpleNamespace(one=lambda: row)


def test_recording_keeps_the_first_settings_and_never_makes_a_row_for_a_dropped_store():
    spec = StoreSpec("ks", "agg", "partitioned-kv", 2, value_codec=MEASURES)
    mine, theirs = InputSettings("json", ("shop",)), InputSettings("json", ("user",))
    session = _Session(None, applied=True)
    assert registry.record_input_settings(session, spec, mine) == mine
    assert session.cql[0].endswith("IF input_spec = null AND value_format = ?")
    assert registry.record_input_settings(_Session(theirs.as_json(), applied=False), spec, mine) == theirs
    with pytest.raises(StoreNotFoundError, match="no longer registered"):
        registry.record_input_settings(_Session(None, applied=False), spec, mine)


def test_a_stores_recovery_reads_its_records_with_the_recorded_settings():
    recorded = InputSettings("json", ("shop", "user"), None, "ts")
    stage = stored_json_input(MEASURES, recorded)
    assert stage.aggregate.text == "n=count(), total=sum_int(amount)"
    assert (stage.key_fields, stage.key_expr, stage.time_field) == (("shop", "user"), None, "ts")
    assert stored_json_input("long", None) is None  # the word count
