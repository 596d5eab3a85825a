"""Outside systems: Cassandra sessions and execution profiles, Kafka topics and producers,
the retry budget, asyncio adapters of the driver and the Spark session. Imports only core."""
