"""A namespace's vector index built in one go (as a store does when it closes after a bulk write)
holds what the previous, copying computation held, and answers every query the same.

The index now keeps the vectors it read as its matrix (no copy), sums the moments a slice of rows
at a time. The vectors, keys and cosines are the same
bytes; the float64 moments differ in their last bits only (the order of the additions changed,
as it already did between an index built at once and one caught up piecewise).
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memkit._retrieval._fusion as fusion
from memkit._retrieval._fusion import VectorIndex, dense_leg
from memkit.adapters import SQLiteAdapter
from memkit.adapters._sqlite._vectors import _arrays
from memkit.embeddings import get_embedder

_WORDS = (
    "kinase helicase ligase tumour sample reads align variant protein pathway cell membrane signal"
    " receptor enzyme binding assay culture genome mutation expression inhibitor dose trial lunch"
    " Caroline Melanie support group painting camping"
).split()
_QUERIES = ["kinase inhibitor dose", "tumour sample reads", "membrane receptor binding", "camping with Melanie"]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=rng.randint(2, 12))) + f" #{i % 97}" for i in range(n)]


def _old_arrays(keys: np.ndarray, matrix: np.ndarray, shortlist: bool) -> dict[str, np.ndarray]:
    """The previous bulk build, frozen: a copy of the vectors, one float64 product over all of them,
    the principal axes and every vector's projection."""
    wide = np.asarray(matrix, dtype=np.float64)
    out = {"keys": keys.copy(), "matrix": matrix.copy(), "sum": wide.sum(axis=0), "moment": wide.T @ wide}
    if shortlist:
        _, axes = np.linalg.eigh(out["moment"])
        out["basis"] = np.ascontiguousarray(axes[:, ::-1][:, :64], dtype=np.float32)
        out["coarse"] = matrix @ out["basis"]
    return out


def _same_answers(new: VectorIndex, old: VectorIndex, queries: np.ndarray, depth: int = 10) -> None:
    for query in queries:
        a, b = dense_leg(new, query, depth), dense_leg(old, query, depth)
        assert a.ranked == b.ranked
        assert a.cosine == b.cosine  # exact rescoring of the same float32 vectors
        assert a.mean == pytest.approx(b.mean, rel=1e-9, abs=1e-12)
        assert a.std == pytest.approx(b.std, rel=1e-9, abs=1e-12)


@pytest.fixture
def shortlisted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fusion, "SHORTLIST_MIN", 1_000)


@pytest.mark.parametrize("count", [700, 6_000])
def test_a_bulk_built_index_holds_what_the_previous_build_held(count: int, shortlisted: None) -> None:
    embedder = get_embedder("default")
    matrix = embedder.embed(_texts(count, seed=count))
    keys = np.arange(10, 10 + 3 * count, 3, dtype=np.int64)

    new = VectorIndex(embedder.dim)
    new.add(keys, matrix.copy(), adopt=True)
    state = new.state()
    old = _old_arrays(keys, matrix, shortlist=count >= fusion.SHORTLIST_MIN)
    assert state["keys"].tobytes() == old["keys"].tobytes()
    assert state["matrix"].tobytes() == old["matrix"].tobytes()
    np.testing.assert_allclose(state["sum"], old["sum"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state["moment"], old["moment"], rtol=1e-12, atol=1e-9)
    assert ("basis" in state) == ("basis" in old)
    previous = VectorIndex.restore(embedder.dim, old)
    _same_answers(new, previous, embedder.embed(_QUERIES))
    # positions by bisection over the kept keys, as by the dictionary the previous build filled
    assert [new.position(int(k)) for k in keys[::97]] == [previous.position(int(k)) for k in keys[::97]]
    assert new.position(11) is None and new.position(int(keys[-1]) + 3) is None


def test_an_adopted_index_changes_as_a_copied_one_does(shortlisted: None) -> None:
    embedder = get_embedder("default")
    matrix = embedder.embed(_texts(1_500, seed=4))
    keys = list(range(1, 1_501))
    adopted, copied = VectorIndex(embedder.dim), VectorIndex(embedder.dim)
    adopted.add(keys, matrix.copy(), adopt=True)
    copied.add(keys, matrix)
    more = embedder.embed(_texts(300, seed=5))
    steps: list[Any] = [
        ("add", list(range(2_000, 2_100)), more[:100]),
        ("remove", [5, 1_499, 2_050, 99_999]),
        ("add", [3_000], more[100:101]),
        ("add", list(range(4_000, 4_199)), more[101:300]),
        ("remove", list(range(100, 400))),
    ]
    for step in steps:
        for index in (adopted, copied):
            if step[0] == "add":
                index.add(step[1], step[2])
            else:
                index.remove(step[1])
        a, b = adopted.state(), copied.state()
        assert a["keys"].tobytes() == b["keys"].tobytes()
        assert a["matrix"].tobytes() == b["matrix"].tobytes()
        np.testing.assert_allclose(a["moment"], b["moment"], rtol=1e-9, atol=1e-9)
        _same_answers(adopted, copied, embedder.embed(_QUERIES))
    assert matrix.tobytes() == embedder.embed(_texts(1_500, seed=4)).tobytes()  # the caller's copy untouched


async def test_a_store_saves_at_close_what_the_previous_build_saved(tmp_path: Path, shortlisted: None) -> None:
    """Three users share an agent id; each namespace's snapshot, saved when the writer closes, holds
    exactly its own stored vectors and the previous build's moments and answers."""
    path = tmp_path / "close.db"
    store = SQLiteAdapter(path)
    store._vectors.resave_min = 1  # bob's few hundred memories are saved too
    # alice's memories lie between carol's (read by key), bob's in one run (read as a range)
    alice, carol = _texts(2_500, seed=1), _texts(7_500, seed=2)
    for start in range(0, 2_500, 250):
        await store.add_many([{"content": t, "user_id": "alice", "agent_id": "lab"}
                              for t in alice[start : start + 250]])
        await store.add_many([{"content": t, "user_id": "carol", "agent_id": "lab"}
                              for t in carol[3 * start : 3 * start + 750]])
    await store.add_many([{"content": t, "user_id": "bob", "agent_id": "lab", "metadata": {"i": i}}
                          for i, t in enumerate(_texts(600, seed=3))])
    await store.aclose()

    embedder = get_embedder("default")
    conn = sqlite3.connect(path)
    try:
        saved = {
            (u, a): (size, coarse_dim, head, coarse, matrix)
            for u, a, size, coarse_dim, head, coarse, matrix in conn.execute(
                "SELECT user_id, agent_id, size, coarse_dim, head, coarse, matrix FROM vector_snapshots")
        }
        assert set(saved) == {("alice", "lab"), ("bob", "lab"), ("carol", "lab")}
        for (user, agent), (size, coarse_dim, head, coarse, matrix) in saved.items():
            stored = conn.execute(
                "SELECT v.seq, v.vector FROM memory_vectors v JOIN memories m ON m.seq = v.seq"
                " WHERE m.user_id = ? AND m.agent_id = ? ORDER BY v.seq", (user, agent)).fetchall()
            keys = np.array([r[0] for r in stored], dtype=np.int64)
            vectors = np.frombuffer(b"".join(r[1] for r in stored), dtype="<f4").reshape(len(stored), -1)
            arrays = _arrays(head, coarse, size, embedder.dim, coarse_dim)
            arrays["matrix"] = np.frombuffer(matrix, dtype="<f4").reshape(size, embedder.dim)
            old = _old_arrays(keys, vectors, shortlist=bool(coarse_dim))
            assert size == len(stored) == {"alice": 2_500, "bob": 600, "carol": 7_500}[user]
            assert arrays["keys"].tobytes() == old["keys"].tobytes()
            assert arrays["matrix"].tobytes() == vectors.tobytes()
            np.testing.assert_allclose(arrays["sum"], old["sum"], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(arrays["moment"], old["moment"], rtol=1e-12, atol=1e-9)
            _same_answers(VectorIndex.restore(embedder.dim, arrays), VectorIndex.restore(embedder.dim, old),
                          embedder.embed(_QUERIES))
    finally:
        conn.close()
