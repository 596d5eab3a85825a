"""A stand-in for Spark's DataStreamReader that records what the job asks of it (argument
plumbing only), for the unit tests of the Kafka source's options."""

from __future__ import annotations


class RecordingReader:
    def __init__(self) -> None:
        self.given: dict[str, str] = {}

    def format(self, name):
        self.given["format"] = name
        return self

    def option(self, key, value):
        self.given[key] = value
        return self

    def options(self, **more):
        self.given.update(more)
        return self

    def load(self):
        return self.given
