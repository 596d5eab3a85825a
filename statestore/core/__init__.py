"""The pure core every wing and every executor relies on: errors, names, codecs, table options,
the partitioner, the store model, windows, durations and event time, settings and the configuration
sections (config/), sorting that spills to disk.

The rule it keeps: it imports nothing of statestore outside core and nothing of Cassandra, Kafka,
Spark or the web (import contracts in pyproject.toml), and does no I/O at import."""
