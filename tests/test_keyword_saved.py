"""A keyword index saved in a store file and loaded by another process finds each term's postings
by bisecting its sorted term list: every lookup gives what a term -> span dict of the saved header gives."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from memkit._retrieval._keyword import KeywordIndex
from memkit.adapters import SQLiteAdapter

TEXTS = [
    "[9:00 am on 3 June, 2023] Caroline: I adopted a golden retriever puppy yesterday",
    "BLAST found homologs of TP53 and BRCA2; e-value 1e-30",
    "Straße café naïve résumé kinases phosphorylation",
    "step 7 of variant-calling failed: samtools exited 137 (out of memory)",
    "zzz zymurgy aardvark 2026 0 00 a",
]


async def test_every_saved_term_and_no_other_is_found_as_the_saved_spans_say(tmp_path: Path) -> None:
    path = tmp_path / "saved.db"
    store = SQLiteAdapter(path, embedder=None)
    await store.add_many([{"content": f"{text} #{i}", "user_id": "u", "agent_id": "a"}
                          for i in range(1_200) for text in TEXTS[i % len(TEXTS):][:2]])
    assert await store.search("TP53 homologs", "u", "a", limit=3)  # builds the index and saves it
    await store.aclose()
    with sqlite3.connect(path) as conn:
        (blob,) = conn.execute("SELECT data FROM keyword_snapshots").fetchone()
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    terms: list[str] = header["terms"]
    docs = header["docs"]
    ends = np.frombuffer(blob, "<i8", len(terms), 8 + size + docs * (8 + 8 + 4 + 1)).tolist()
    spans = dict(zip(terms, zip([0, *ends[:-1]], ends, strict=True), strict=True))  # what a dict would hold
    assert len(terms) > 1_000 and terms == sorted(terms)

    loaded = KeywordIndex.from_bytes(blob)
    for term in terms:
        assert loaded._base_terms.get(term) == spans[term]
        slots, tfs = loaded._posting(term) or ((), ())
        lo, hi = spans[term]
        assert len(slots) == len(tfs) == hi - lo > 0
    for absent in ("", " ", "\x00", terms[0][:-1] or "0", terms[-1] + "z", "\U0010ffff", "tp5", "tp533",
                   *(t + "\x00" for t in terms[::97])):
        if absent not in spans:
            assert loaded._base_terms.get(absent) is None
            assert loaded._posting(absent) is None
    assert list(loaded._base_terms) == terms
    assert loaded.to_bytes() == blob  # saved again as it was read
