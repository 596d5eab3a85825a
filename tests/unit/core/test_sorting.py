import random

from statestore.core.sorting import external_sort


def test_external_sort_spills_and_merges_in_order():
    items = [random.Random(3).randbytes(6) for _ in range(1)] + [bytes([i % 251, i % 7]) for i in range(5000)]
    random.Random(1).shuffle(items)
    result = list(external_sort(iter(items), key=lambda b: b, chunk_size=300))
    assert result == sorted(items)


def test_external_sort_of_nothing():
    assert list(external_sort(iter([]), key=lambda x: x, chunk_size=10)) == []
