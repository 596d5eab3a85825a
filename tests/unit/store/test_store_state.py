"""Which recorded state is a store's (statestore.store.book.status.store_state): its writer's run's,
never a run refused at the lease."""

from statestore.store.book.status import store_state
from statestore.store.book.stream_log import StateChange


def change(state, at_ms, writer):
    return StateChange(state, at_ms, None, None, "host", 1, None, writer)


# Newest first: run A runs; run B is refused while A holds the lease.
A_RUNNING = [change("running", 3, "h:1:a"), change("waiting_for_lease", 2, "h:1:a"), change("starting", 1, "h:1:a")]
B_REFUSED = [change("refused", 6, "h:2:b"), change("waiting_for_lease", 5, "h:2:b"), change("starting", 4, "h:2:b")]


def test_the_lease_holders_run_gives_the_state_not_a_refused_second_writer():
    assert store_state(B_REFUSED + A_RUNNING, "h:1:a") == A_RUNNING[0]


def test_a_killed_writer_keeps_its_last_state_once_its_lease_is_gone():
    # A was killed (no `stopped`), its lease expired: the refused B says nothing about the store.
    assert store_state(B_REFUSED + A_RUNNING, None).state == "running"


def test_without_a_refusal_the_newest_run_is_the_store_state():
    c_waiting = [change("waiting_for_lease", 8, "h:3:c"), change("starting", 7, "h:3:c")]
    # A restart waiting for the killed run's lease: the holder is still A until its lease expires.
    assert store_state(c_waiting + A_RUNNING, "h:1:a") == A_RUNNING[0]
    assert store_state(c_waiting + A_RUNNING, None) == c_waiting[0]
    failed = [change("failed", 9, "h:3:c"), *c_waiting]  # failed after the lease (e.g. its checkpoint)
    assert store_state(failed + A_RUNNING, None).state == "failed"


def test_a_holder_that_logs_no_states_and_older_rows_without_a_writer():
    # `statestore reset` holds the lease under its own name and records no state rows.
    assert store_state(B_REFUSED + A_RUNNING, "host:9:reset") == A_RUNNING[0]
    old = [change("stopped", 2, None), change("running", 1, None)]
    assert store_state(old, None) == old[0]
    assert store_state(B_REFUSED, None) == B_REFUSED[0]  # every run refused: the newest change
    assert store_state([], "h:1:a") is None
