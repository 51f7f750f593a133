"""The PostgreSQL writer analyses a batch at once (each text split once, new words stemmed in one
round): the terms are exactly what analysing each text alone gives."""

from __future__ import annotations

from memkit._retrieval import _keyword
from memkit._retrieval._keyword import analyze, analyze_many


def test_a_batch_is_analysed_as_each_text_alone() -> None:
    texts = [
        "Caroline: met the new postdoc on 8 May, 2023 at 1:56 pm",
        "",
        "!!! ... ???",
        "running runners ran; RUNS run-through",
        "Zellkultur in München, 東京 の 実験, naïve café",
        "follow-up 2023-05-09 and again next Tuesday",
        "unseenwordzzq unseenwordzzq appears twice",
        "running runners ran; RUNS run-through",  # a repeat in one batch
    ]
    batch = analyze_many(iter(texts))  # any iterable, read once
    _keyword._stemmer.cache.clear()  # each text alone, from a stemmer that knows none of the words
    assert batch == [analyze(t) for t in texts]
    assert analyze_many([]) == []
