"""statestore: stream-processing state kept in Apache Cassandra tables.

The library behind the word-count stream, the CLI and the Airflow hook: store schemas
(one module per store type), the replay-safe micro-batch apply, codecs and the partitioner
every reader shares with the writer.
"""

__version__ = "0.1.0"
