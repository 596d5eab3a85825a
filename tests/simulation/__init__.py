"""A deterministic simulator of the stream's batch protocol (issue 45).

The real decision functions of statestore (the checkpoint and position checks, the write
timestamp, the pending position, the replay-safe plan of a slice, the future limit, the
tokenizer) run against in-memory fakes of Kafka (fake_kafka), Spark's checkpoint folder and
micro-batch planning (fake_spark) and Cassandra (fake_cassandra); driver.py is the job's
driver around them, truth.py the one invariant, machine.py the Hypothesis state machine that
composes crashes, restarts, settings changes and operator actions. sessions.py is the session
store kind (the real apply_sessions planning over fake_sessions' table, LOGGED batches and task
attempts). `python -m tests.simulation --seconds N` runs it for N seconds;
tests/simulation/test_simulation.py and test_sessions.py are its bounded CI runs;
test_reproducible.py checks that a seed runs the same whatever ran before it and under any
PYTHONHASHSEED, and that a failure's printed command runs it again.
"""
