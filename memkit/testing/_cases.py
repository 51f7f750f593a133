"""The data the conformance suite writes and queries: filter rows and cases, hostile strings."""

from __future__ import annotations

from typing import Any

from memkit._core._models import MemoryItem

__all__ = ["BAD_FILTERS", "FILTER_CASES", "FILTER_ROWS", "HOSTILE", "ids"]

# Metadata shaped to exercise every operator, type rule and missing-key rule.
FILTER_ROWS: list[dict[str, Any]] = [
    {"gene": "TP53", "score": 0.9, "n": 3, "ok": True, "tags": ["a", "b"], "run": {"step": 1}},
    {"gene": "BRCA1", "score": 0.4, "n": 10, "ok": False, "run": {"step": 2}},
    {"gene": "EGFR", "score": 0.5, "n": 1, "ok": True, "note": None},
    {"gene": "tp53", "score": 1, "n": "3", "ok": 1},
    {"score": 0.95, "n": 7},
    {},
]

FILTER_CASES: list[dict[str, Any]] = [
    {"gene": "TP53"},
    {"gene": {"$eq": "TP53"}},
    {"gene": {"$ne": "TP53"}},
    {"gene": {"$in": ["TP53", "EGFR", "nope"]}},
    {"gene": {"$nin": ["TP53", "EGFR"]}},
    {"gene": None},
    {"note": None},
    {"n": 3},
    {"n": "3"},
    {"n": {"$gt": 3}},
    {"n": {"$gte": 3}},
    {"n": {"$lt": 3}},
    {"n": {"$lte": 3, "$gt": 0}},
    {"score": {"$gte": 0.5}},
    {"score": 1},
    {"score": 1.0},
    {"ok": True},
    {"ok": 1},
    {"ok": {"$ne": True}},
    {"gene": {"$gt": "C"}},
    {"gene": {"$lt": "a"}},
    {"run.step": 2},
    {"run.step": {"$in": [1, 2]}},
    {"tags": "a"},
    {"gene": "TP53", "ok": True},
    {"gene": {"$in": []}},
    {"missing": {"$ne": 1}},
    {"missing": {"$gt": 0}},
]

BAD_FILTERS: list[Any] = [
    {"gene": {"$regex": "TP"}},
    {"gene": {"$where": "1"}},
    {"gene; DROP TABLE memories": 1},
    {"$.gene": 1},
    {"a..b": 1},
    {"1abc": 1},
    {"gene": {"$in": "TP53"}},
    {"gene": {"$gt": True}},
    {"gene": {"$gt": None}},
    {"gene": {"$eq": ["list"]}},
    {"gene": {}},
    ["gene", "TP53"],
    {"n": 2**64},
    {"n": {"$in": [1, -(2**64)]}},
    {"gene": "TP\ud800"},
]

HOSTILE = [
    "'); DROP TABLE memories; --",
    "\" OR 1=1 --",
    "MATCH (n) DETACH DELETE n",
    "}) DETACH DELETE n //",
    "<img src=x onerror=alert(1)>",
    "back\\slash and 'quotes' and \"doubles\"",
    "NEAR(a b) AND NOT c* ^d",
]


def ids(items: list[MemoryItem]) -> list[str]:
    return [item.id for item in items]


