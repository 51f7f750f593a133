"""Closing a SQLite store saves the search snapshots its writes left stale, so that the first search
of the next process restores them, whether or not anyone searched before closing.

Not timed (bench/cold.py measures the first search); these check that a fresh process finds saved,
current snapshots and answers exactly as a process that recomputed everything.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from memkit.adapters import SQLiteAdapter

_WORDS = (
    "kinase helicase ligase tumour sample reads align variant protein pathway cell membrane signal"
    " receptor enzyme binding assay culture genome mutation expression inhibitor dose trial"
).split()


def _items(n: int, seed: int, agent: str = "a") -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"content": " ".join(rng.choices(_WORDS, k=rng.randint(3, 9))), "user_id": "u", "agent_id": agent,
             "metadata": {"batch": i % 7}} for i in range(n)]


# A fresh process: how far each snapshot lags the namespace, then its answers (the snapshots are read
# as saved: the process is told not to save anything itself).
_CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from memkit.adapters import SQLiteAdapter
    from memkit.adapters._sqlite._keywords import lag
    path, forget = sys.argv[1], sys.argv[2] == "forget"
    if forget:
        import sqlite3
        conn = sqlite3.connect(path)
        conn.execute("DELETE FROM keyword_snapshots"); conn.execute("DELETE FROM vector_snapshots")
        conn.commit(); conn.close()
    store = SQLiteAdapter(path)
    store._keywords.resave_min = store._vectors.resave_min = 10**12
    def lags():
        db = store._db()
        return {f"{t}/{agent}": lag(db, t, "u", agent)
                for t in ("keyword_snapshots", "vector_snapshots") for agent in ("a", "b")}
    lags = store._worker.call(lags)
    async def answers():
        out = []
        for mode in ("keyword", "semantic", "hybrid"):
            for query in ("kinase inhibitor dose", "tumour sample reads", "membrane receptor"):
                hits = await store.search(query, "u", "a", limit=10, mode=mode)
                out.append([[h.id, h.score] for h in hits])
        return out
    print(json.dumps({"lags": lags, "answers": asyncio.run(answers())}))
    store.close()
""")


def _fresh_process(path: Path, forget: bool = False) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), "forget" if forget else "keep"],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _saved(path: Path) -> dict[str, tuple[int, int]]:
    conn = sqlite3.connect(path)
    try:
        rows = [(f"{kind}/{a}", s, c) for kind in ("keyword", "vector")
                for a, s, c in conn.execute(f"SELECT agent_id, seq, change FROM {kind}_snapshots")]  # noqa: S608
        return {name: (seq, change) for name, seq, change in rows}
    finally:
        conn.close()


async def test_a_bulk_import_closed_unsearched_leaves_current_snapshots(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteAdapter(path)
    for start in range(0, 3_000, 1_000):  # an import in chunks, as a script does
        await store.add_many(_items(1_000, seed=start))
    await store.add_many(_items(5, seed=99, agent="b"))  # too few changes to be worth a snapshot
    assert _saved(path) == {}  # writing saved nothing: only closing does
    await store.aclose()

    assert _saved(path) == {"keyword/a": (3_005, 0), "vector/a": (3_005, 0)}  # at the feed position
    fresh = _fresh_process(path)
    assert fresh["lags"] == {"keyword_snapshots/a": 0, "vector_snapshots/a": 0,
                             "keyword_snapshots/b": 5, "vector_snapshots/b": 5}
    assert fresh["answers"] == _fresh_process(tmp_path / "store.db", forget=True)["answers"]


async def test_writes_after_a_search_are_saved_on_close_too(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteAdapter(path)
    await store.add_many(_items(2_000, seed=1))
    await store.search("kinase", "u", "a", mode="hybrid")  # saves the snapshots, as before
    store._worker.call(lambda: None)  # (the vector snapshot is saved just behind the search)
    assert _saved(path) == {"keyword/a": (2_000, 0), "vector/a": (2_000, 0)}
    for item in _items(1_200, seed=2):  # one by one: add itself never saves a snapshot
        await store.add(item["content"], "u", "a", item["metadata"])
    doomed = [m.id for m in await store.get_all("u", "a", limit=10)]
    for memory_id in doomed:
        assert await store.delete(memory_id)
    assert _saved(path) == {"keyword/a": (2_000, 0), "vector/a": (2_000, 0)}
    await store.aclose()
    assert _saved(path) == {"keyword/a": (3_200, 10), "vector/a": (3_200, 10)}
    fresh = _fresh_process(path)
    assert fresh["lags"]["keyword_snapshots/a"] == fresh["lags"]["vector_snapshots/a"] == 0
    assert fresh["answers"] == _fresh_process(path, forget=True)["answers"]


async def test_a_store_closed_with_few_changes_saves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteAdapter(path)
    await store.add_many(_items(999, seed=3))  # one short of resave_min
    await store.aclose()
    assert _saved(path) == {}
    reopened = SQLiteAdapter(path)  # a reader that writes nothing saves nothing on close either
    await reopened.get_all("u", "a")
    await reopened.aclose()
    assert _saved(path) == {}
