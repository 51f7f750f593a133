"""A namespace whose vectors are over SQLite's one-value limit still gets a saved vector snapshot:
its moments, axes and projections, without the matrix (the vectors stay in memory_vectors). A fresh
process restores it and answers exactly as a store rebuilt from the rows; deletions since the save,
two namespaces, a kill in the middle of the save and an older memkit's lookup are all safe.

The limit is lowered in each process (``_vectors._MAX_BLOB``) so that about 21k vectors exceed it
(a shortlist starts at 20k); real processes on a real SQLite file. Not timed: the numbers are in
docs/benchmarks.md.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest

from memkit.embeddings import DEFAULT_EMBEDDER
from tests._snapshot_answers import assert_same, kill_when_signalled, read, rebuilt, run_python

LIMIT = 20_000_000  # 21k x 384 x 4 bytes = 32 MB of vectors: over it; their projections (5 MB): under

_LOWER = f"import memkit.adapters._sqlite._vectors as _v; _v._MAX_BLOB = {LIMIT}\n"

# Two users sharing an agent id and workflow ids (spelled two ways, sometimes missing), interleaved
# in batches as one agent's writer would; the ids written per user go to a file. ``resave`` as in
# tests/test_sqlite_multi_writers.py.
_WRITER = _LOWER + textwrap.dedent("""
    import json, random, sys
    import memkit
    path, out, n, resave, first = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    words = ("kinase helicase ligase tumour sample reads align variant protein pathway cell membrane"
             " signal receptor enzyme binding assay culture genome mutation expression inhibitor dose").split()
    mem = memkit.open("sqlite:///" + path)
    mem.provider._keywords.resave_min = mem.provider._vectors.resave_min = resave
    rng = random.Random(first)
    ids = {"alice": [], "bob": []}
    for at in range(first, first + n, 500):
        batch = []
        for i in range(at, min(first + n, at + 500)):
            meta = {"n": i, "lab": ("wet", "dry")[i % 2]}
            if i % 3 == 0:
                meta["workflow_id"] = f"wf-{i % 4}"
            elif i % 3 == 1:
                meta["workflowId"] = f"wf-{i % 4}"
            user = "alice" if i % 5 else "bob"
            batch.append({"content": f"{user} note {i} " + " ".join(rng.choices(words, k=rng.randint(3, 9))),
                          "user_id": user, "agent_id": "bio", "metadata": meta})
        for memory_id, item in zip(mem.add_many(batch), batch):
            ids[item["user_id"]].append(memory_id)
    mem.close()
    json.dump(ids, open(out, "w"))
""")

# A fresh process: whether each namespace's index came from a snapshot (partial: restored without
# its vectors), then its answers, the last ones filtered (every vector read), saving nothing itself.
_READER = _LOWER + textwrap.dedent("""
    import asyncio, json, sys
    from memkit.adapters import SQLiteAdapter
    store = SQLiteAdapter(sys.argv[1])
    store._keywords.resave_min = store._vectors.resave_min = 10**12
    users = ("alice", "bob")
    async def answers():
        out, restored = {}, {}
        for user in users:
            for mode in ("semantic", "hybrid", "keyword"):
                for query in ("kinase inhibitor dose", "tumour sample reads", "membrane receptor"):
                    hits = await store.search(query, user, "bio", limit=10, mode=mode)
                    out[f"{user}/{mode}/{query}"] = [[h.id, h.score] for h in hits]
                    if mode == "semantic" and query.startswith("kinase"):
                        restored[user] = store._vectors._indexes[(user, "bio")].partial
            for mode in ("semantic", "hybrid"):
                hits = await store.search("cell pathway", user, "bio", limit=10, mode=mode, filters={"lab": "dry"})
                out[f"{user}/{mode}/filtered"] = [[h.id, h.score] for h in hits]
        return out, restored
    found, restored = asyncio.run(answers())
    print(json.dumps({"answers": found, "restored": restored}))
    store.close()
""")


def _read(path: Path) -> dict[str, Any]:
    return read(_READER, path)


def _rebuilt(path: Path, tmp: Path) -> dict[str, Any]:
    return rebuilt(_READER, path, tmp)


def _assert_same(answers: dict[str, Any], expected: dict[str, Any]) -> None:
    assert_same(answers, expected, nonempty=True)


def _snapshots(path: Path) -> dict[str, tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return {user: rest for user, *rest in conn.execute(
            "SELECT user_id, seq, change, embedder, size, coarse_dim, length(coarse), length(matrix)"
            " FROM vector_snapshots WHERE agent_id = 'bio'"
        )}
    finally:
        conn.close()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """A store whose two namespaces (about 21k and 5k memories) were saved at close with the limit lowered."""
    tmp = tmp_path_factory.mktemp("rows")
    path, ids = tmp / "lab.db", tmp / "ids.json"
    run_python(_WRITER, path, ids, 26_500, 1_000, 0)
    return path, json.loads(ids.read_text())


def _copy(written: tuple[Path, dict[str, list[str]]], tmp_path: Path) -> Path:
    path = tmp_path / "lab.db"
    conn = sqlite3.connect(written[0])
    try:
        conn.execute("VACUUM INTO ?", (str(path),))
    finally:
        conn.close()
    return path


def test_a_namespace_over_the_limit_is_saved_without_its_vectors_and_answers_as_a_rebuild(
    written: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(written, tmp_path)
    saved = _snapshots(path)
    _, _, embedder, size, coarse_dim, coarse, matrix = saved["alice"]
    assert size == len(written[1]["alice"]) and size > 20_000
    assert size * 384 * 4 > LIMIT  # over the lowered limit: on main this namespace had no snapshot
    assert coarse_dim == 64 and coarse == size * 64 * 4 and matrix == 0
    # An older memkit looks its snapshot up by the embedder's exact name: it finds none and builds
    # from the rows, never reading the empty matrix as the vectors
    assert embedder != DEFAULT_EMBEDDER and embedder.startswith(DEFAULT_EMBEDDER)
    # The small namespace keeps the one-value snapshot, vectors included (and no shortlist)
    assert saved["bob"][2] == DEFAULT_EMBEDDER and saved["bob"][6] == saved["bob"][3] * 384 * 4
    found = _read(path)
    assert found["restored"] == {"alice": True, "bob": False}  # alice's index came from the snapshot
    _assert_same(found["answers"], _rebuilt(path, tmp_path))
    # Two namespaces never cross: every hit is one of the user's own memories
    for name, hits in found["answers"].items():
        user = name.split("/")[0]
        assert {h[0] for h in hits} <= set(written[1][user]), name


def test_deletions_after_the_save_and_during_a_process_read_correctly(
    written: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(written, tmp_path)
    before = _snapshots(path)
    # A reader that restored alice's index (partial), while another process deletes some of her memories
    script = _LOWER + textwrap.dedent("""
        import asyncio, json, subprocess, sys
        from memkit.adapters import SQLiteAdapter
        path, ids = sys.argv[1], json.loads(sys.argv[2])
        store = SQLiteAdapter(path)
        store._keywords.resave_min = store._vectors.resave_min = 10**12
        async def run():
            await store.search("kinase inhibitor dose", "alice", "bio", limit=10, mode="semantic")
            assert store._vectors._indexes[("alice", "bio")].partial
            other = SQLiteAdapter(path)
            other._keywords.resave_min = other._vectors.resave_min = 10**12
            for memory_id in ids:
                await other.delete(memory_id, user_id="alice", agent_id="bio")
            other.close()
            out = {}
            for mode in ("semantic", "hybrid"):
                hits = await store.search("cell pathway", "alice", "bio", limit=10, mode=mode, filters={"lab": "dry"})
                out[f"alice/{mode}/filtered"] = [[h.id, h.score] for h in hits]
            return out
        print(json.dumps(asyncio.run(run())))
        store.close()
    """)
    gone = written[1]["alice"][100:20_000:997]
    during = json.loads(run_python(script, path, json.dumps(gone)))
    assert _snapshots(path) == before  # nobody saved: the restore below sees deletions past the snapshot
    found = _read(path)
    assert found["restored"]["alice"] is False  # built from the rows: the deleted vectors are gone
    rebuilt = _rebuilt(path, tmp_path)
    _assert_same(found["answers"], rebuilt)
    # The reader that had restored the index before the deletions answers as the rebuild too
    _assert_same(during, {name: rebuilt[name] for name in during})
    deleted = set(gone)
    for name, hits in {**during, **found["answers"]}.items():
        assert not {h[0] for h in hits} & deleted, name


_KILLED = _LOWER + textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import memkit
    from memkit.adapters._sqlite import _vectors
    path, signal_file = sys.argv[1], Path(sys.argv[2])
    def half_written(db, column, rowid, data):
        # inside the snapshot's write transaction, its row written but not committed
        signal_file.write_text("saving")
        time.sleep(600)
    _vectors._fill = half_written
    mem = memkit.open("sqlite:///" + path)
    mem.provider._keywords.resave_min = mem.provider._vectors.resave_min = 100
    mem.add_many([{"content": f"late note {i} on kinase and tumour reads", "user_id": "alice", "agent_id": "bio"}
                  for i in range(700)])
    mem.close()
""")


def test_a_kill_in_the_middle_of_the_save_leaves_the_previous_snapshot(
    written: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    path = _copy(written, tmp_path)
    before = _snapshots(path)
    signal_file = tmp_path / "signal"
    kill_when_signalled(_KILLED, [str(path), str(signal_file)], signal_file, 600)
    assert _snapshots(path) == before
    found = _read(path)
    assert found["restored"]["alice"] is True  # the old snapshot, caught up from the feed
    _assert_same(found["answers"], _rebuilt(path, tmp_path))
    # The next closer saves the namespace, again without its vectors, and without reading them: its
    # index restored from the snapshot stays partial (a marker file says if any whole read happened)
    marker = tmp_path / "read-whole"
    watched = _WRITER.replace("import memkit\n", textwrap.dedent(f"""
        import memkit
        from memkit.adapters._sqlite import _vectors
        def _whole(db, keys, dim, _stored=_vectors._stored):
            open({str(marker)!r}, "w").close()
            return _stored(db, keys, dim)
        _vectors._stored = _whole
    """), 1)
    run_python(watched, path, tmp_path / "more.json", 500, 100, 30_000)
    after = _snapshots(path)
    assert after["alice"][0] > before["alice"][0] and after["alice"][6] == 0
    assert not marker.exists()
    _assert_same(_read(path)["answers"], _rebuilt(path, tmp_path))
