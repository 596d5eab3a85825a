"""The schema-version rule (statestore.store.book.schema): which versions a writer of this
release refuses, what the refusal says, and how a migration reports itself."""

from __future__ import annotations

from statestore.store.book import registry, schema


def test_only_this_releases_version_may_be_written():
    assert schema.SCHEMA_VERSION == registry.CURRENT_SCHEMA_VERSION  # what new stores are registered at
    assert schema.version_problem("words", schema.SCHEMA_VERSION) is None
    older = schema.version_problem("words", schema.BEFORE_VERSIONS)
    assert "schema version 1" in older and "`statestore migrate words`" in older
    assert "Nothing was written" in older
    newer = schema.version_problem("words", schema.SCHEMA_VERSION + 1)
    assert f"newer than this release's {schema.SCHEMA_VERSION}" in newer and "upgrade statestore" in newer


def test_a_migration_says_what_it_changed():
    done = schema.Migration("words", 1, 2, ("statestore_stores.topic_id", "words_deadletters.stream_time"))
    assert done.changed
    assert done.describe() == (
        "store words: schema 1 -> 2 (added statestore_stores.topic_id, words_deadletters.stream_time)"
    )
    assert done.as_dict() == {"store": "words", "from": 1, "to": 2, "added": list(done.added)}
    assert schema.Migration("words", 1, 2, ()).describe() == "store words: schema 1 -> 2"
    nothing = schema.Migration("words", 2, 2, ())
    assert not nothing.changed and nothing.describe() == "store words: schema 2, up to date"
