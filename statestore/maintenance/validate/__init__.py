"""Idempotency validation of a word-count store: recount from the input, replay, data-quality suite."""
