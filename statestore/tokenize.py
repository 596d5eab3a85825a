"""Word tokenization: lower-case, then maximal runs of Unicode letters and numbers.

A word is a maximal run of characters of the general categories L* (letters) and N*
(numbers); everything else separates words. The stream uses `words_column`, built from
Spark SQL built-ins only (no Python UDF on the hot path). `tokenize` is the same rule in
plain Python, the reference the tests check the Spark expression against.

Lower-casing is Java's `String.toLowerCase` on the Spark side and `str.lower` here: both
apply Unicode's full case mapping (e.g. final sigma), so they agree on every assigned
character the two Unicode versions share.
"""

from __future__ import annotations

import regex

# Java's regex engine, which Spark's split() uses, reads \p{L} and \p{N} as the general
# categories, supplementary planes included; the `regex` package reads them the same way.
WORD_SEPARATOR = r"[^\p{L}\p{N}]+"
_WORD = regex.compile(r"[\p{L}\p{N}]+")


def tokenize(text: str) -> list[str]:
    """The words of `text`, in order, lower-cased."""
    return _WORD.findall(text.lower())


def words_column(text_column):
    """A Spark Column of arrays of words (may contain empty strings at the edges)."""
    from pyspark.sql import functions as F

    return F.split(F.lower(text_column), WORD_SEPARATOR)
