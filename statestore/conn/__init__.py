"""Outside systems: Cassandra sessions and execution profiles, Kafka topics and producers,
the retry budget, asyncio adapters of the driver, the Spark session and Spark's Python worker
daemon as the library starts it. Imports only core."""
