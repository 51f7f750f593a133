"""Tokenising and keyword scoring shared by the adapters that have no full-text engine."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["STOPWORDS", "bm25_scores", "query_terms", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)

# Dropped from queries (never from stored text): they match almost every memory,
# cost the most to score, and add nothing to the ranking.
STOPWORDS = frozenset(
    [
        "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
        "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
        "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had",
        "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how",
        "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself",
        "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
        "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that",
        "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
        "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when",
        "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
        "yourself", "yourselves"
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (Unicode letters, digits and underscore)."""
    return _WORD.findall(text.lower())


def query_terms(query: str) -> list[str]:
    """Distinct query tokens without stopwords; all tokens if every one is a stopword."""
    tokens = list(dict.fromkeys(tokenize(query)))
    kept = [t for t in tokens if t not in STOPWORDS]
    return kept or tokens


def bm25_scores(
    terms: Sequence[str], documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """Okapi BM25 of each tokenised document against ``terms`` (0.0 when none match)."""
    n = len(documents)
    if n == 0 or not terms:
        return [0.0] * n
    wanted = set(terms)
    counts = [Counter(t for t in doc if t in wanted) for doc in documents]
    avg_len = sum(len(d) for d in documents) / n or 1.0
    df = Counter(t for c in counts for t in c)
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted}
    scores = []
    for doc, tf in zip(documents, counts, strict=True):
        norm = k1 * (1.0 - b + b * len(doc) / avg_len)
        scores.append(sum(idf[t] * f * (k1 + 1.0) / (f + norm) for t, f in tf.items()))
    return scores
