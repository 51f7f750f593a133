"""A namespace's vector index saved in the store file: a new process restores it instead of
recomputing it, and never answers differently than one that recomputed everything."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import memkit._retrieval._fusion
import memkit.adapters._sqlite._vectors
from memkit.adapters import SQLiteAdapter
from memkit.adapters._sqlite._schema import MIGRATIONS, SCHEMA_VERSION, statements

_WORDS = (
    "kinase helicase ligase tumour sample reads align variant protein pathway cell membrane signal"
    " receptor enzyme binding assay culture genome mutation expression inhibitor dose trial"
).split()
_QUERIES = ["kinase inhibitor dose", "tumour sample reads", "membrane receptor binding", "genome mutation"]


def _texts(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {"content": " ".join(rng.choices(_WORDS, k=rng.randint(3, 9))), "user_id": "u", "agent_id": "a",
         "metadata": {"batch": i % 7}}
        for i in range(n)
    ]


@pytest.fixture
def shortlisted(monkeypatch: pytest.MonkeyPatch) -> None:
    # The shortlist (and so a partial restore) starts at 20,000 vectors; a few thousand show the same paths.
    monkeypatch.setattr(memkit._retrieval._fusion, "SHORTLIST_MIN", 1_000)


def _snapshots(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT user_id, agent_id, seq, change, size, coarse_dim FROM vector_snapshots").fetchall()
    finally:
        conn.close()


def _forget(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM vector_snapshots")
    conn.commit()
    conn.close()


async def _answers(store: SQLiteAdapter, limit: int = 10) -> list[Any]:
    out = []
    for mode in ("semantic", "hybrid"):
        for query in _QUERIES:
            for filters in (None, {"batch": 3}):
                hits = await store.search(query, "u", "a", limit=limit, mode=mode, filters=filters)
                out.append([(h.id, h.score, h.score_details) for h in hits])
    return out


def _fresh(path: Path, save: bool = False, settle: bool = True) -> SQLiteAdapter:
    store = SQLiteAdapter(path)
    if not save:
        store._vectors.resave_min = store._keywords.resave_min = 10**12
    if not settle:  # keep a restored index partial: every search reads the vectors it rescores
        store._settle = lambda: None  # type: ignore[method-assign]
    return store


async def test_restored_and_recomputed_indexes_answer_alike(
    tmp_path: Path, shortlisted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v.db"
    first = SQLiteAdapter(path)
    await first.add_many(_texts(6_000, seed=1))
    await first.search("kinase", "u", "a", mode="semantic")  # loads every vector, then saves them
    await first.aclose()
    assert _snapshots(path)[0][4:] == (6_000, 64)

    restored = _fresh(path, settle=False)
    assert len(await restored.search("kinase", "u", "a", mode="semantic")) == 5
    index = restored._vectors._indexes[("u", "a")]
    assert index.partial  # the moments and projections came from the file, the vectors stayed there
    with_snapshot = await _answers(restored)
    await restored.aclose()

    # The rest of the vectors are read behind the first search, 1,000 a step here.
    monkeypatch.setattr(memkit.adapters._sqlite._vectors, "SUPPLY", 1_000)
    stepped = _fresh(path, settle=False)
    await stepped.search("kinase", "u", "a", mode="semantic")
    assert stepped._conn is not None
    conn = stepped._conn
    assert [await stepped._run(stepped._vectors.settle, conn) for _ in range(6)] == [True] * 5 + [False]
    assert not stepped._vectors._indexes[("u", "a")].partial
    await stepped.aclose()
    settled = _fresh(path)  # each step queued by the last one, behind any call that came meanwhile
    await settled.search("kinase", "u", "a", mode="semantic")
    index = settled._vectors._indexes[("u", "a")]
    for _ in range(20):
        if not index.partial:
            break
        await settled._run(lambda: None)
    assert not index.partial
    assert await _answers(settled) == with_snapshot
    await settled.aclose()

    _forget(path)
    recomputed = _fresh(path)
    without = await _answers(recomputed)
    await recomputed.aclose()
    assert with_snapshot == without
    assert _snapshots(path) == []  # (these handles were told not to save)


async def test_changes_after_the_snapshot_are_caught_up(tmp_path: Path, shortlisted: None) -> None:
    path = tmp_path / "v.db"
    first = SQLiteAdapter(path)
    ids = await first.add_many(_texts(5_000, seed=2))
    await first.search("kinase", "u", "a", mode="hybrid")
    await first.aclose()
    writer = _fresh(path)  # writes after the save, from another handle
    assert await writer.delete(ids[0])
    assert await writer.delete(ids[4_000])
    late = await writer.add("kinase inhibitor dose escalation trial", "u", "a")
    await writer.aclose()

    restored = _fresh(path)
    caught_up = await _answers(restored, limit=20)
    assert not restored._vectors._indexes[("u", "a")].partial  # removing a vector read them all
    for mode in ("semantic", "hybrid"):  # the memory written after the snapshot is there
        top = await restored.search("kinase inhibitor dose escalation trial", "u", "a", limit=3, mode=mode)
        assert late in [h.id for h in top]
    await restored.aclose()
    _forget(path)
    recomputed = _fresh(path)
    fresh = await _answers(recomputed, limit=20)
    await recomputed.aclose()
    # Moments updated by the changes and moments summed afresh differ in the last bits only.
    assert [[h[0] for h in hits] for hits in caught_up] == [[h[0] for h in hits] for hits in fresh]
    for got, want in zip(caught_up, fresh, strict=True):
        assert [h[1] for h in got] == pytest.approx([h[1] for h in want], rel=1e-9, abs=1e-12)
    found = {h[0] for hits in fresh for h in hits}
    assert ids[0] not in found and ids[4_000] not in found


async def test_a_snapshot_replaced_under_a_partial_index_is_reloaded(tmp_path: Path, shortlisted: None) -> None:
    path = tmp_path / "v.db"
    first = SQLiteAdapter(path)
    ids = await first.add_many(_texts(5_000, seed=3))
    await first.search("kinase", "u", "a", mode="semantic")
    await first.aclose()
    reader = _fresh(path, settle=False)
    await reader.search("kinase", "u", "a", mode="semantic")
    assert reader._vectors._indexes[("u", "a")].partial
    other = SQLiteAdapter(path)  # deletes and adds, then saves a newer snapshot over the one reader restored
    other._vectors.resave_min = 1
    assert await other.delete(ids[1])
    await other.add_many(_texts(2_000, seed=4))
    await other.search("kinase", "u", "a", mode="semantic")
    await other.aclose()
    assert _snapshots(path)[0][4] == 6_999
    # A filter needs every vector; a deletion too: the reader's snapshot is gone, so it starts again.
    got = await reader.search("kinase inhibitor", "u", "a", mode="semantic", limit=50, filters={"batch": 1})
    assert not reader._vectors._indexes[("u", "a")].partial
    assert len(reader._vectors._indexes[("u", "a")]) == 6_999
    await reader.aclose()
    _forget(path)
    recomputed = _fresh(path)
    want = await recomputed.search("kinase inhibitor", "u", "a", mode="semantic", limit=50, filters={"batch": 1})
    await recomputed.aclose()
    assert [h.id for h in got] == [h.id for h in want]


async def test_reembed_and_reset_drop_the_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    store = SQLiteAdapter(path)
    store._vectors.resave_min = 1
    await store.add_many(_texts(50, seed=5))
    await store.search("kinase", "u", "a", mode="semantic")
    await store._run(lambda: None)  # saved behind the search
    assert len(_snapshots(path)) == 1
    await store.reembed("default", progress=False)
    assert _snapshots(path) == []  # its vectors were replaced: a snapshot of the old ones must go
    await store.search("kinase", "u", "a", mode="semantic")
    await store._run(lambda: None)  # saved behind the search
    assert len(_snapshots(path)) == 1
    await store.reset()
    assert _snapshots(path) == []
    await store.aclose()


async def test_a_snapshot_of_another_embedder_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    store = SQLiteAdapter(path)
    store._vectors.resave_min = 1
    await store.add_many(_texts(40, seed=6))
    await store.search("kinase", "u", "a", mode="semantic")
    await store.aclose()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE vector_snapshots SET embedder = 'something-else'")
    conn.commit()
    conn.close()
    again = _fresh(path)
    await again.search("kinase", "u", "a", mode="semantic")
    assert len(again._vectors._indexes[("u", "a")]) == 40  # loaded from the vectors themselves
    await again.aclose()


async def test_a_version_6_store_migrates_and_saves_vector_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for target in range(1, 7):
        step = MIGRATIONS[target]
        if callable(step):
            step(conn)
        else:
            for statement in statements(step):
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    old = SQLiteAdapter(path)  # a version 6 store in use: memories with vectors
    await old.add_many(_texts(30, seed=7))
    await old.aclose()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE vector_snapshots")
    conn.execute("DROP TABLE marks")  # what a version 6 file lacks (later versions' tables)
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()

    store = SQLiteAdapter(path)
    store._vectors.resave_min = 1
    assert SCHEMA_VERSION >= 7
    hits = await store.search("kinase", "u", "a", mode="hybrid", limit=30)
    await store.aclose()
    assert len(hits) > 0
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    assert [row[:2] + row[4:] for row in _snapshots(path)] == [("u", "a", 30, 0)]


_WRITER = """
import asyncio, json, sys
from memkit.adapters import SQLiteAdapter

async def main():
    store = SQLiteAdapter(sys.argv[1])
    store._vectors.resave_min = store._keywords.resave_min = 1  # save after every search
    batch = int(sys.argv[2])
    while True:
        batch += 1
        items = [{"content": f"kinase note {batch} {i} sample", "user_id": "u", "agent_id": "a"} for i in range(20)]
        print(json.dumps(await store.add_many(items)), flush=True)  # acknowledged
        store._vectors._unsaved.add(("u", "a"))  # a snapshot is written behind every search
        await store.search("kinase sample", "u", "a", mode="hybrid")

asyncio.run(main())
"""


@pytest.mark.slow
def test_killed_while_saving_snapshots_loses_nothing_and_answers_alike(tmp_path: Path) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    import memkit

    path = tmp_path / "killed.db"
    acknowledged: list[str] = []
    rng = random.Random(8)
    for trial in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(trial * 1_000)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        # The clock starts at the first acknowledged batch: on a loaded machine the writer's imports
        # alone can outlast a fixed wall-clock window, and then the trial would test nothing.
        first = child.stdout.readline()
        assert first, "the writer died on its own"
        acknowledged.extend(json.loads(first))
        deadline = time.monotonic() + rng.uniform(1.5, 4.0)
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            assert line, "the writer died on its own"
            acknowledged.extend(json.loads(line))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = {row[0] for row in conn.execute("SELECT id FROM memories")}
    saved = conn.execute("SELECT count(*) FROM vector_snapshots").fetchone()[0]
    conn.close()
    assert set(acknowledged) <= stored and len(acknowledged) > 100
    assert saved == 1  # some snapshot survived the kills whole (or was rewritten by the next writer)

    def answers() -> list[Any]:
        mem = memkit.open(f"sqlite:///{path}")
        try:
            return [[(h.id, round(h.score or 0.0, 9)) for h in mem.search(q, "u", "a", limit=20, mode=mode)]
                    for mode in ("semantic", "hybrid") for q in ("kinase note 3", "sample 17")]
        finally:
            mem.close()

    restored = answers()
    _forget(path)
    assert answers() == restored
