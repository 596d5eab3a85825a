"""Generated text with a ground truth known by construction.

Lines are built from a vocabulary of words joined by separators that contain no letter or
number, in random letter case; the expected count of a word is how often it was chosen.
"""

from __future__ import annotations

import random
from collections import Counter

import regex

_WORDS = [
    # Latin, with accents and digits inside words
    "stream",
    "state",
    "ledger",
    "river",
    "keeper",
    "batch",
    "offset",
    "commit",
    "replay",
    "école",
    "café",
    "naïve",
    "über",
    "straße",
    "ångström",
    "fjörð",
    "año",
    "x",
    "a1b2",
    "v4",
    # numbers alone, including non-ASCII digits (category Nd) and fractions-free forms
    "42",
    "2026",
    "007",
    "٣٤",
    "१२",
    # Cyrillic, Greek, CJK, Hangul, Arabic, Hebrew, Devanagari letters
    "река",
    "учёт",
    "ποταμός",
    "λόγος",
    "河流",
    "账本",
    "川",
    "강물",
    "نهر",
    "נהר",
    "नदी",
    # a supplementary-plane letter (CJK Extension B)
    "𠀋",
]
_SEPARATORS = [
    " ",
    "  ",
    ", ",
    ". ",
    "! ",
    "? ",
    " - ",
    " — ",
    "\t",
    "_",
    "+",
    "/",
    "'",
    '"',
    " (",
    ") ",
    " 🙂 ",
    " € ",
    "…",
    " ** ",
    ";",
    ":",
    "|",
]


def _case_stable(word: str) -> bool:
    # Random casing must not change the word's lower-case form (e.g. 'ß' -> 'SS' -> 'ss').
    return word.upper().lower() == word and word.title().lower() == word


# Only words that are one token by the rule (e.g. not 'नदी', whose vowel sign is a mark).
VOCABULARY = [w for w in _WORDS if _case_stable(w) and regex.fullmatch(r"[\p{L}\p{N}]+", w)]


def generate(n_lines: int, seed: int, max_words: int = 12, empty_every: int = 17) -> tuple[list[str], Counter]:
    rng = random.Random(seed)
    lines: list[str] = []
    truth: Counter = Counter()
    for i in range(n_lines):
        if i % empty_every == 0:
            lines.append("" if rng.random() < 0.5 else rng.choice(_SEPARATORS))
            continue
        parts = []
        if rng.random() < 0.3:
            parts.append(rng.choice(_SEPARATORS))
        for _ in range(rng.randint(1, max_words)):
            word = rng.choice(VOCABULARY)
            truth[word] += 1
            casing = rng.random()
            parts.append(word.upper() if casing < 0.2 else word.title() if casing < 0.4 else word)
            parts.append(rng.choice(_SEPARATORS))
        lines.append("".join(parts))
    return lines, truth
