"""Several processes writing one SQLite file and closing around the same time: one of them saves the
search snapshots, none saves over a newer one, a kill in the middle of a save costs nothing, and a
fresh process's searches answer exactly as a store rebuilt from scratch.

Real processes on a real file; the order they close in is whatever the machine makes of it, so the
checks hold for any interleaving (what is asserted never depends on who won the lock). Not timed:
bench/sqlite_writers.py measures the close.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memkit
from memkit._retrieval._fusion import VectorIndex
from memkit._retrieval._keyword import KeywordIndex
from memkit.adapters import SQLiteAdapter
from memkit.adapters._sqlite._keywords import _save as save_keywords
from memkit.adapters._sqlite._snapshots import lock_path
from memkit.adapters._sqlite._vectors import _save as save_vectors
from tests._snapshot_answers import (
    assert_same,
    copy_without_snapshots,
    kill_when_signalled,
    read,
    rebuilt,
    run_python,
)

# One writer: its notes in small batches, alternating two users who share workflow ids (spelled two
# ways, sometimes missing), deleting a few of its own; then it closes. ``resave`` lowers the number of
# changes a snapshot must lack to be saved, so that a few thousand memories exercise it.
_WRITER = textwrap.dedent("""
    import random, sys, time
    import memkit
    path, me, n, go, resave = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    words = ("kinase helicase ligase tumour sample reads align variant protein pathway cell membrane"
             " signal receptor enzyme binding assay culture genome mutation expression inhibitor dose").split()
    mem = memkit.open("sqlite:///" + path)
    store = mem.provider
    store._keywords.resave_min = store._vectors.resave_min = resave
    rng = random.Random(me)
    time.sleep(max(0.0, go - time.time()))
    mine = []
    for at in range(0, n, 40):
        batch = []
        for i in range(at, min(n, at + 40)):
            meta = {"writer": me, "n": i}
            if i % 3 == 0:
                meta["workflow_id"] = f"wf-{i % 4}"
            elif i % 3 == 1:
                meta["workflowId"] = f"wf-{i % 4}"
            batch.append({"content": f"w{me} " + " ".join(rng.choices(words, k=rng.randint(3, 9))),
                          "user_id": ("alice", "bob")[i % 2], "agent_id": "bio", "metadata": meta})
        mine += zip(mem.add_many(batch), (b["user_id"] for b in batch))
        if at % 400 == 0 and mine:
            memory_id, user = mine.pop(rng.randrange(len(mine)))
            mem.delete(memory_id, user_id=user, agent_id="bio")
    mem.close()
""")

# A fresh process: how far each snapshot lags, then its answers, reading the snapshots as saved
# (told to save nothing itself).
_READER = textwrap.dedent("""
    import asyncio, json, sys
    from memkit.adapters import SQLiteAdapter
    from memkit.adapters._sqlite._keywords import lag
    store = SQLiteAdapter(sys.argv[1])
    store._keywords.resave_min = store._vectors.resave_min = 10**12
    users = ("alice", "bob")
    lags = store._worker.call(lambda: {f"{t}/{u}": lag(store._db(), t, u, "bio")
                                        for t in ("keyword_snapshots", "vector_snapshots") for u in users})
    async def answers():
        out = {}
        for user in users:
            for mode in ("keyword", "semantic", "hybrid"):
                for query in ("kinase inhibitor dose", "tumour sample reads", "w1 membrane receptor"):
                    hits = await store.search(query, user, "bio", limit=10, mode=mode)
                    out[f"{user}/{mode}/{query}"] = [[h.id, h.score] for h in hits]
        return out
    print(json.dumps({"lags": lags, "answers": asyncio.run(answers())}))
    store.close()
""")


def _read(path: Path) -> dict[str, Any]:
    return read(_READER, path)


def _rebuilt(path: Path, tmp: Path) -> dict[str, Any]:
    return rebuilt(_READER, path, tmp)



def _saved(path: Path) -> dict[str, tuple[int, int]]:
    conn = sqlite3.connect(path)
    try:
        return {f"{kind}/{user}": (seq, change) for kind in ("keyword", "vector")
                for user, seq, change in conn.execute(f"SELECT user_id, seq, change FROM {kind}_snapshots")}  # noqa: S608
    finally:
        conn.close()


def _new_store(path: Path) -> None:
    SQLiteAdapter(path).close()  # the schema and the default embedder's record exist before the race


@pytest.mark.parametrize("stagger", [0.0, 1.5], ids=["together", "staggered"])
def test_writers_closing_at_once_leave_snapshots_a_fresh_process_agrees_with(tmp_path: Path, stagger: float) -> None:
    path = tmp_path / "lab.db"
    _new_store(path)
    go = time.time() + 8
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(me), str(600 + 150 * me),
                                 str(go + me * stagger), "100"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in range(4)]
    for writer in writers:
        _, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err
    found = _read(path)
    # Whoever saved last saved after every writer's rows were in (the holder looks again after letting go)
    assert all(lag < 100 for lag in found["lags"].values()), found["lags"]
    assert_same(found["answers"], _rebuilt(path, tmp_path))
    assert all(found["answers"][f"{user}/keyword/kinase inhibitor dose"] for user in ("alice", "bob"))


# A writer whose save is interrupted where ``stage`` says: it writes, starts closing, and tells the
# test (a file) when it is in the middle of its save, then waits there to be killed.
_KILLED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import memkit
    from memkit.adapters._sqlite import _keywords
    path, stage, signal_file = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    def stop_here():
        signal_file.write_text("saving")
        time.sleep(600)
    if stage == "building":
        def slow_index(self, db, user_id, agent_id, _index=_keywords.KeywordCache.index):
            stop_here()
        _keywords.KeywordCache.index = slow_index
    else:  # inside the snapshot's write transaction, its row written but not committed
        def half_written(db, sql, params):
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql, params)
            stop_here()
        _keywords.write_unless_busy = half_written
    mem = memkit.open("sqlite:///" + path)
    mem.provider._keywords.resave_min = mem.provider._vectors.resave_min = 100
    mem.add_many([{"content": f"late note {i} on kinase and tumour reads", "user_id": "alice", "agent_id": "bio"}
                  for i in range(700)])
    mem.close()
""")


@pytest.mark.parametrize("stage", ["building", "writing"])
def test_a_writer_killed_in_the_middle_of_its_save_leaves_a_store_that_searches_correctly(
    tmp_path: Path, stage: str
) -> None:
    path = tmp_path / "lab.db"
    _new_store(path)
    run_python(_WRITER, path, 0, 900, 0, 100)  # a store with snapshots, for the killed save to replace
    before = _saved(path)
    assert before
    signal_file = tmp_path / "signal"
    kill_when_signalled(_KILLED, [str(path), stage, str(signal_file)], signal_file, 300)
    assert _saved(path) == before  # nothing of the interrupted save, the previous snapshots intact
    found = _read(path)
    assert found["lags"]["keyword_snapshots/alice"] >= 700  # its rows are in the store, replayed from the feed
    assert_same(found["answers"], _rebuilt(path, tmp_path))
    # The kernel let go of its lock: the next closer saves
    run_python(_WRITER, path, 1, 300, 0, 100)
    after = _read(path)
    assert all(lag < 100 for lag in after["lags"].values()), after["lags"]
    assert_same(after["answers"], _rebuilt(path, tmp_path))


def test_a_closer_skips_saving_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    _new_store(path)
    fd = os.open(lock_path(str(path)), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a process in the middle of its save holds it
        run_python(_WRITER, path, 0, 800, 0, 100)
        assert _saved(path) == {}  # it closed without building anything
    finally:
        os.close(fd)
    found = _read(path)
    assert found["lags"]["keyword_snapshots/alice"] == found["lags"]["vector_snapshots/alice"] >= 398
    assert_same(found["answers"], _rebuilt(path, tmp_path))
    # Its request waits in the store: the next closer that holds the lock saves those namespaces too,
    # though it wrote only another one
    mem = memkit.open(f"sqlite:///{path}")
    mem.provider._keywords.resave_min = mem.provider._vectors.resave_min = 100  # type: ignore[attr-defined]
    mem.add_many([{"content": f"carol's note {i} on kinase", "user_id": "carol", "agent_id": "bio"}
                  for i in range(150)])
    mem.close()
    after = _read(path)
    assert all(lag == 0 for lag in after["lags"].values()), after["lags"]
    assert_same(after["answers"], _rebuilt(path, tmp_path))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM store_meta WHERE key LIKE 'snapshot wanted %'").fetchone()[0] == 0
    finally:
        conn.close()


# The lock holder, in the middle of its save, waits for another writer to write and close (that one
# finds the lock taken and skips): the holder's second look must cover the other's rows.
_HOLDER = textwrap.dedent("""
    import subprocess, sys
    import memkit
    from memkit.adapters._sqlite import _keywords
    path, writer = sys.argv[1], sys.argv[2]
    calls = []
    def save_current(self, db, user_id, agent_id, _save=_keywords.KeywordCache.save_current):
        if not calls:  # the first save: another writer comes and goes meanwhile
            subprocess.run([sys.executable, "-c", writer, path, "1", "500", "0", "100"], check=True, timeout=600)
        calls.append((user_id, agent_id))
        _save(self, db, user_id, agent_id)
    _keywords.KeywordCache.save_current = save_current
    mem = memkit.open("sqlite:///" + path)
    mem.provider._keywords.resave_min = mem.provider._vectors.resave_min = 100
    mem.add_many([{"content": f"holder note {i} on kinase", "user_id": "alice", "agent_id": "bio"}
                  for i in range(400)])
    mem.close()
    print(len(calls))
""")


def test_the_lock_holder_saves_again_for_a_writer_that_skipped_while_it_saved(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    _new_store(path)
    saves = int(run_python(_HOLDER, path, _WRITER))
    assert saves >= 2  # alice saved once, then again after letting go (bob's rows came meanwhile too)
    found = _read(path)
    assert all(lag < 100 for lag in found["lags"].values()), found["lags"]
    assert_same(found["answers"], _rebuilt(path, tmp_path))


def test_a_snapshot_is_never_saved_over_a_newer_one(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    _new_store(path)
    run_python(_WRITER, path, 0, 800, 0, 100)
    newest = _saved(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        old = KeywordIndex()
        old.add(1, "an older view of the namespace", 1)
        save_keywords(conn, "alice", "bio", (1, 0), old)
        vectors = VectorIndex(384)
        vectors.add([1], np.full((1, 384), 384**-0.5, dtype=np.float32))
        save_vectors(conn, "alice", "bio", (1, 0), "static-minilm-l6-cls-d384", vectors)
        assert _saved(path) == newest
    finally:
        conn.close()


def _cli_search(path: Path, query: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "memkit", "--url", f"sqlite:///{path}", "search", query, "--user", "alice",
         "--agent", "bio", "--limit", "10", "--json"],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout


def test_the_command_line_search_saves_a_vector_snapshot_it_found_far_behind(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    _new_store(path)
    run_python(_WRITER, path, 0, 1000, 0, 100)  # snapshots saved on close
    run_python(_WRITER, path, 1, 2400, 0, 10**12)  # writers that never save: 1,200 of alice's 1,700 past them
    behind = _read(path)["lags"]
    assert behind["vector_snapshots/alice"] >= 1_000

    conn = sqlite3.connect(path, isolation_level=None)
    try:  # a writer holds the lock: the search answers and saves nothing, never waiting
        conn.execute("BEGIN IMMEDIATE")
        held = _cli_search(path, "kinase inhibitor dose")
        assert _read(path)["lags"] == behind
    finally:
        conn.execute("ROLLBACK")
        conn.close()

    first = _cli_search(path, "kinase inhibitor dose")
    assert first == held and first.count("\n") == 10
    lags = _read(path)["lags"]
    assert lags["vector_snapshots/alice"] == lags["keyword_snapshots/alice"] == 0  # saved for the next one
    assert lags["vector_snapshots/bob"] == behind["vector_snapshots/bob"]  # only what it searched
    assert _cli_search(path, "kinase inhibitor dose") == first
    copy = tmp_path / "scratch.db"
    copy_without_snapshots(path, copy)
    assert _cli_search(copy, "kinase inhibitor dose") == first  # as rebuilt from scratch
