"""serve's supervisor: a worker that served a while is replaced at once; replacements that keep
dying soon after their start wait longer each time, up to a bound, and a healthy run resets it."""

from __future__ import annotations

from statestore.http.serve import RestartBackoff


def test_a_worker_that_served_a_while_is_replaced_at_once():
    assert RestartBackoff().delay(lived_s=3600) == 0.0


def test_quick_deaths_double_the_wait_up_to_the_bound():
    backoff = RestartBackoff(first_s=0.5, max_s=5.0, healthy_s=10.0)
    assert [backoff.delay(lived_s=0.2) for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_healthy_run_starts_the_doubling_again():
    backoff = RestartBackoff(first_s=0.5, healthy_s=10.0)
    backoff.delay(1.0), backoff.delay(1.0)
    assert backoff.delay(lived_s=60.0) == 0.0
    assert backoff.delay(lived_s=1.0) == 0.5
