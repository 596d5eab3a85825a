from collections import Counter

import pytest
from pyspark.sql import functions as F

from statestore.stream.tokenize import tokenize, words_column
from tests.corpus import generate

CASES = [
    ("Hello, World!", ["hello", "world"]),
    ("", []),
    ("  --  ", []),
    ("snake_case and kebab-case", ["snake", "case", "and", "kebab", "case"]),
    ("abc123 4.5", ["abc123", "4", "5"]),
    ("École ÉCOLE école", ["école", "école", "école"]),
    ("don't", ["don", "t"]),
    ("河流不记得", ["河流不记得"]),
    ("ΟΔΟΣ", ["οδος"]),  # final sigma: full Unicode case mapping
    ("ΛΌΓΟΣ'STREAM ΛΌΓΟΣ", ["λόγος", "stream", "λόγος"]),  # ...of each word on its own
    ("İstanbul", ["i", "stanbul"]),  # 'İ' lower-cases to 'i' + U+0307, a mark
    ("नदी नदी", ["नद", "नद"]),  # the vowel sign U+0940 is a mark (Mc), not a letter: it separates
    ("٣٤ apples", ["٣٤", "apples"]),
    ("emoji🙂between", ["emoji", "between"]),
    ("𠀋𠀋 x", ["𠀋𠀋", "x"]),
    ("tab\tnew\nline\r\n", ["tab", "new", "line"]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_reference_tokenizer(text, expected):
    assert tokenize(text) == expected


def _spark_words(spark, lines):
    df = spark.createDataFrame([(line,) for line in lines], "text string")
    exploded = df.select(F.explode(words_column(F.col("text"))).alias("w")).filter(F.length("w") > 0)
    return Counter(row.w for row in exploded.collect())


def test_spark_expression_matches_reference_on_cases(spark):
    lines = [text for text, _ in CASES]
    assert _spark_words(spark, lines) == Counter(w for text, expected in CASES for w in expected)


def test_spark_expression_matches_generated_ground_truth(spark):
    lines, truth = generate(400, seed=7)
    assert _spark_words(spark, lines) == truth
    assert Counter(w for line in lines for w in tokenize(line)) == truth
