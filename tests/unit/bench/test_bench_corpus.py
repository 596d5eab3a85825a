"""The benchmarks' generated input (bench/bench_common.py) and the fixed-rate schedule
(bench/streaming_compare/compare/feed.py)."""

from __future__ import annotations

from collections import Counter

import pytest
from bench_common import generate, generate_with_counts, make_vocabulary, zipf_rank_of
from compare.feed import paced, spread_timestamps
from compare.worker import fill_line

from statestore.stream.tokenize import tokenize


@pytest.fixture(scope="module")
def corpus():
    return generate_with_counts(n_words=60_000, vocab_size=5_000, zipf_s=1.0, words_per_line=10, seed=3)


def test_the_ground_truth_is_what_the_tokenizer_finds_in_the_lines(corpus):
    lines, _, truth = corpus
    found = Counter(w for line in lines for w in tokenize(line.decode("utf-8")))
    assert found == truth
    assert sum(truth.values()) == 60_000


def test_each_line_s_word_count_is_its_token_count(corpus):
    lines, words, _ = corpus
    assert len(words) == len(lines)
    assert [len(tokenize(line.decode("utf-8"))) for line in lines] == words
    assert max(words) <= 19 and min(words) >= 1
    assert 9 <= sum(words) / len(words) <= 11  # mean words per line about --words-per-line


def test_frequencies_follow_zipf(corpus):
    _, _, truth = corpus
    ranked = [n for _, n in truth.most_common()]
    harmonic = sum(1 / r for r in range(1, 5_001))
    # Rank r has probability (1/r) / H(5000): the top word about 11% of the text.
    assert ranked[0] / 60_000 == pytest.approx(1 / harmonic, rel=0.1)
    assert ranked[0] / ranked[9] == pytest.approx(10, rel=0.3)
    half = zipf_rank_of(5_000, 1.0, 0.5)
    assert sum(ranked[:half]) / 60_000 == pytest.approx(0.5, abs=0.03)


def test_generation_is_deterministic_by_seed_and_generate_agrees(corpus):
    lines, _, truth = corpus
    again, again_truth = generate(60_000, 5_000, 1.0, 10, seed=3)
    assert again == lines and again_truth == truth
    other, _ = generate(60_000, 5_000, 1.0, 10, seed=4)
    assert other != lines


def test_vocabulary_words_are_distinct_lowercase_letters():
    import random

    vocabulary = make_vocabulary(3_000, random.Random(1))
    assert len(set(vocabulary)) == 3_000
    assert all(w.isalpha() and w.islower() and 2 <= len(w) <= 12 for w in vocabulary)


def test_fill_lines_hold_distinct_keys_that_tokenize_to_themselves():
    keys = [w for start in range(0, 1_000, 10) for w in tokenize(fill_line(range(start, start + 10)).decode())]
    assert len(keys) == 1_000 == len(set(keys))
    assert fill_line([0, 1, 26 * 26]) == b"kaaaaa kaaaab kaabaa"


def test_paced_schedule_keeps_the_word_rate_and_cycles_the_lines():
    lines, words = [b"a b", b"c d e f"], [2, 4]
    schedule = list(paced(rate_words_per_s=6, duration_s=2, lines=lines, words=words))
    # 2 + 4 words per cycle at 6 words/s: a line due every 1/3 s then 2/3 s.
    assert [round(due, 3) for _, _, due in schedule] == [0, 0.333, 1.0, 1.333]
    assert [line for line, _, _ in schedule] == [b"a b", b"c d e f"] * 2
    with pytest.raises(ValueError):
        list(paced(0, 1, lines, words))


def test_spread_timestamps_cover_the_span_before_the_end_evenly_in_order():
    assert spread_timestamps(5, 100, 1_000) == [900, 920, 940, 960, 980]
    assert spread_timestamps(0, 100, 1_000) == []


def _stat_line(pid: int, name: str, ppid: int, utime: int, stime: int) -> str:
    """A /proc stat line: pid (name) state ppid ... with utime and stime at fields 14 and 15."""
    return f"{pid} ({name}) S {ppid} 0 0 0 0 0 0 0 0 0 {utime} {stime} 0 0 20 0\n"


def test_jit_ticks_are_the_compiler_threads_of_the_java_processes_under_the_root(tmp_path):
    from bench_common import jit_ticks, process_tree_ticks_by_kind

    def process(pid, name, ppid, utime, threads=()):
        (tmp_path / str(pid) / "task").mkdir(parents=True)
        (tmp_path / str(pid) / "stat").write_text(_stat_line(pid, name, ppid, utime, 0))
        for tid, (thread, user, system) in enumerate(threads, start=pid * 10):
            (tmp_path / str(pid) / "task" / str(tid)).mkdir()
            (tmp_path / str(pid) / "task" / str(tid) / "stat").write_text(_stat_line(tid, thread, ppid, user, system))

    process(100, "python", 1, 7)
    compiler = [("C2 CompilerThre", 30, 5), ("C1 CompilerThre", 10, 0), ("Executor task l", 500, 9)]
    process(101, "java", 100, 554, compiler)
    process(102, "python3", 100, 40)
    process(200, "java", 1, 999, [("C2 CompilerThre", 999, 0)])  # another JVM, not the root's
    assert jit_ticks(100, tmp_path) == 45
    assert process_tree_ticks_by_kind(100, tmp_path) == {"driver": 7, "jvm": 554, "workers": 40}
    assert jit_ticks(None, tmp_path) == 0
