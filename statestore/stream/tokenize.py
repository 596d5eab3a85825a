"""Word tokenization: maximal runs of Unicode letters and numbers, lower-cased.

A word is a maximal run of characters of the general categories L* (letters) and N*
(numbers); everything else separates words. Each word is lower-cased on its own, so its
form never depends on its neighbours (Unicode's final-sigma rule looks at the following
character: 'ΛΌΓΟΣ' is 'λόγος' before a space or an apostrophe alike). Where lower-casing
yields a character that is neither (e.g. 'İ' -> 'i' + combining dot U+0307), that character
separates too, exactly as if the text had been lower-cased first.

The stream uses `words_column`, built from Spark SQL built-ins and higher-order functions
only (no Python UDF on the hot path). `tokenize` is the same rule in plain Python, the
reference the tests check the Spark expression against.
"""

from __future__ import annotations

import regex
from pyspark.sql import functions as F

# Java's regex engine, which Spark's split() uses, reads \p{L} and \p{N} as the general
# categories, supplementary planes included; the `regex` package reads them the same way.
WORD_SEPARATOR = r"[^\p{L}\p{N}]+"
_WORD = regex.compile(r"[\p{L}\p{N}]+")


def tokenize(text: str) -> list[str]:
    """The words of `text`, in order, lower-cased."""
    return [word for run in _WORD.findall(text) for word in _WORD.findall(run.lower())]


def words_column(text_column):
    """A Spark Column of arrays of words (may contain empty strings: filter them out)."""
    runs = F.split(text_column, WORD_SEPARATOR)
    return F.flatten(F.transform(runs, lambda run: F.split(F.lower(run), WORD_SEPARATOR)))
