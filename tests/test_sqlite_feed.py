"""The keyword and vector indexes never disagree with the store file, whoever wrote and in what order.

A memory's ``seq`` is never handed out twice and deletions are logged, so an index that
consumes that feed is exact by construction, and so is one restored from a snapshot saved
at a feed position and brought up to date from there; these tests check it against the
in-memory adapter, from two processes sharing one file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, multiple, rule

import memkit
from memkit.adapters import InMemoryAdapter, SQLiteAdapter
from memkit.adapters._sqlite._schema import MIGRATIONS, statements


def test_deleting_the_newest_memory_does_not_hide_the_next_one(tmp_path: Path) -> None:
    mem = memkit.open(f"sqlite:///{tmp_path / 'r.db'}?embedder=none")
    mem.add("alpha kinase", "alice", "bio")
    old = mem.add("beta helicase", "alice", "bio")
    assert [h.id for h in mem.search("helicase", "alice", "bio")] == [old]
    assert mem.delete(old)
    new = mem.add("gamma ligase", "alice", "bio")
    assert [h.id for h in mem.search("ligase", "alice", "bio")] == [new]
    assert mem.search("helicase", "alice", "bio") == []
    mem.close()


def test_another_process_deleting_and_adding_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    mem = memkit.open(f"sqlite:///{path}?embedder=none")
    mem.add("alpha kinase", "alice", "bio")
    old = mem.add("beta helicase", "alice", "bio")
    assert [h.id for h in mem.search("helicase", "alice", "bio")] == [old]
    script = textwrap.dedent(f"""
        import memkit
        other = memkit.open("sqlite:///{path}?embedder=none")
        assert other.delete({old!r})
        print(other.add("gamma ligase", "alice", "bio"))
        other.close()
    """)
    new = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout.strip()
    assert mem.search("helicase", "alice", "bio") == []
    assert [h.id for h in mem.search("ligase", "alice", "bio")] == [new]
    mem.close()


async def test_a_version_4_store_migrates_and_stops_reusing_seqs(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for target in range(1, 5):
        step = MIGRATIONS[target]
        assert isinstance(step, str)
        for statement in statements(step):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 4")
    conn.executemany(
        "INSERT INTO memories (id, user_id, agent_id, content, created_us) VALUES (?, 'u', 'g', ?, ?)",
        [("a", "old dog", 1), ("b", "new cat", 2)],
    )
    conn.execute("DELETE FROM memories WHERE id = 'b'")
    conn.close()
    mem = SQLiteAdapter(path, embedder=None)
    fresh = await mem.add("a cat again", "u", "g")
    await mem.add_trace("g", "wf", {"tool": "blast", "status": "ok"}, user_id="u")
    await mem.aclose()
    conn = sqlite3.connect(path)
    seqs = dict(conn.execute("SELECT id, seq FROM memories"))
    assert seqs["a"] == 1 and seqs[fresh] >= 2
    assert conn.execute("SELECT count(*) FROM trace_steps").fetchone()[0] == 1  # the trace trigger survived
    conn.execute("DELETE FROM memories WHERE id = ?", (fresh,))
    assert conn.execute("SELECT seq FROM memory_deletions").fetchall() == [(seqs[fresh],)]
    conn.close()


# -- two processes against the in-memory reference ------------------------------------

_WORKER = textwrap.dedent("""
    import asyncio, json, sys
    import memkit._retrieval._fusion
    from memkit.adapters import SQLiteAdapter

    # Shortlists from a handful of vectors on: saved vector indexes carry their projections and
    # are restored without their vectors, which are read when a search or a deletion needs them.
    memkit._retrieval._fusion.SHORTLIST_MIN = 5

    async def main():
        store = None
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd.pop("op")
            if op == "open":
                if store is not None:
                    await store.aclose()
                # One cached keyword index and every index saved: switching namespace (or
                # reopening, for vectors) restores a saved index and replays the feed from its
                # position, so that path is checked too.
                store = SQLiteAdapter(cmd["path"], embedder="default", max_indexed=1)
                store._keywords.resave_min = store._vectors.resave_min = 1
                out = None
            elif op == "add":
                new = await store.add(cmd["content"], cmd["user_id"], cmd["agent_id"])
                item = await store.get(new)
                out = [new, item.created_at.isoformat()]
            elif op == "add_many":
                out = await store.add_many(cmd["items"])
            elif op == "delete":
                out = await store.delete(cmd["id"])
            elif op == "search":
                hits = await store.search(cmd["query"], cmd["user_id"], cmd["agent_id"], limit=50, mode=cmd["mode"])
                out = [[h.id, round(h.score, 9)] for h in hits]
            print(json.dumps(out), flush=True)
        if store is not None:
            await store.aclose()

    asyncio.run(main())
""")


class _Worker:
    """A process holding its own SQLiteAdapter, driven one JSON line at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def __call__(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"worker died on {op}"
        return json.loads(line)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[_Worker, _Worker]]:
    pair = (_Worker(), _Worker())
    try:
        yield pair
    finally:
        for worker in pair:
            worker.stop()


_WORDS = ["kinase", "helicase", "ligase", "sample", "tumour", "reads", "align", "variant"]
_NAMESPACES = [("alice", "bio"), ("bob", "bio")]
_text = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join)


@pytest.mark.slow
def test_two_processes_agree_with_the_reference(workers: tuple[_Worker, _Worker], tmp_path_factory: Any) -> None:
    """Random adds, batches, deletes and searches from two processes; every search equals the reference."""

    class Store(RuleBasedStateMachine):
        memories = Bundle("memories")

        @initialize()
        def open(self) -> None:
            path = tmp_path_factory.mktemp("feed") / "m.db"
            self.path = str(path)
            for worker in workers:
                worker("open", path=self.path)
            self.reference = InMemoryAdapter(embedder="default")
            self.counter = 0
            self.alive: list[str] = []  # in insertion order

        def _reference_add(self, items: list[dict[str, Any]]) -> None:
            asyncio.run(self.reference.add_many(items))
            self.alive.extend(i["id"] for i in items)

        def _delete(self, who: int, memory: str) -> None:
            assert workers[who]("delete", id=memory) is (memory in self.alive)
            assert asyncio.run(self.reference.delete(memory)) is (memory in self.alive)
            if memory in self.alive:
                self.alive.remove(memory)

        @rule(target=memories, who=st.sampled_from([0, 1]), text=_text, ns=st.sampled_from(_NAMESPACES))
        def add(self, who: int, text: str, ns: tuple[str, str]) -> str:
            new, created = workers[who]("add", content=text, user_id=ns[0], agent_id=ns[1])
            self._reference_add([{"id": new, "content": text, "user_id": ns[0], "agent_id": ns[1],
                                  "created_at": created}])
            return str(new)

        @rule(target=memories, who=st.sampled_from([0, 1]), texts=st.lists(_text, min_size=1, max_size=5),
              ns=st.sampled_from(_NAMESPACES))
        def add_many(self, who: int, texts: list[str], ns: tuple[str, str]) -> Any:
            items = []
            for text in texts:
                self.counter += 1
                items.append({"id": f"m{self.counter}", "content": text, "user_id": ns[0], "agent_id": ns[1],
                              "created_at": f"2026-01-01T00:00:{self.counter % 60:02d}+00:00"})
            assert workers[who]("add_many", items=items) == [i["id"] for i in items]
            self._reference_add(items)
            return multiple(*(i["id"] for i in items))

        @rule(who=st.sampled_from([0, 1]), memory=consumes(memories))
        def delete(self, who: int, memory: str) -> None:
            self._delete(who, memory)

        @rule(who=st.sampled_from([0, 1]))
        def delete_newest(self, who: int) -> None:
            # The newest memory is the one whose key a careless store hands out again.
            if self.alive:
                self._delete(who, self.alive[-1])

        @rule(who=st.sampled_from([0, 1]))
        def reopen(self, who: int) -> None:
            workers[who]("open", path=self.path)

        def _check(self, who: int, query: str, ns: tuple[str, str], mode: str) -> None:
            got = workers[who]("search", query=query, user_id=ns[0], agent_id=ns[1], mode=mode)
            want = asyncio.run(self.reference.search(query, ns[0], ns[1], limit=50, mode=mode))
            assert got == [[h.id, round(h.score, 9)] for h in want]

        @rule(who=st.sampled_from([0, 1]), query=_text, ns=st.sampled_from(_NAMESPACES),
              mode=st.sampled_from(["keyword", "semantic", "hybrid"]))
        def search(self, who: int, query: str, ns: tuple[str, str], mode: str) -> None:
            self._check(who, query, ns, mode)

        @invariant()
        def both_processes_see_every_memory(self) -> None:
            # Every word at once matches every memory: each one's presence and score is checked
            # (semantic: the 50 nearest, with the namespace's statistics in every hybrid score).
            for who in (0, 1):
                for ns in _NAMESPACES:
                    for mode in ("keyword", "semantic", "hybrid"):
                        self._check(who, " ".join(_WORDS), ns, mode)

    Store.TestCase.settings = settings(
        max_examples=15, stateful_step_count=20, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    Store.TestCase().runTest()


async def test_another_writer_costs_no_query_per_cached_namespace(tmp_path: Path) -> None:
    path = tmp_path / "many.db"
    mem = SQLiteAdapter(path, embedder=None)
    await mem.add_many([{"content": f"note {i}", "user_id": f"u{i}", "agent_id": "a"} for i in range(60)])
    for i in range(60):
        assert len(await mem.search("note", f"u{i}", "a")) == 1  # 60 namespaces cached
    other = SQLiteAdapter(path, embedder=None)
    await other.add("note from elsewhere", "u0", "a")
    await other.aclose()
    statements: list[str] = []
    assert mem._conn is not None
    mem._conn.set_trace_callback(statements.append)
    try:
        await mem.add("one more note", "u1", "a")
        assert len(await mem.search("note", "u0", "a")) == 2
    finally:
        mem._conn.set_trace_callback(None)
    assert len(statements) < 20, statements  # a constant handful, not one per namespace
    await mem.aclose()


async def test_a_saved_index_is_loaded_and_brought_up_to_date(tmp_path: Path) -> None:
    path = tmp_path / "saved.db"
    first = SQLiteAdapter(path, embedder=None)
    ids = await first.add_many([{"content": f"kinase note {i}", "user_id": "u", "agent_id": "a"} for i in range(1_200)])
    assert len(await first.search("kinase", "u", "a", limit=2_000)) == 1_200  # built, then saved
    await first.aclose()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM keyword_snapshots").fetchone()[0] == 1
    conn.close()
    writer = SQLiteAdapter(path, embedder=None)  # changes after the save, from another handle
    assert await writer.delete(ids[0])
    late = await writer.add("kinase written late", "u", "a")
    await writer.aclose()
    second = SQLiteAdapter(path, embedder=None)
    found = {h.id for h in await second.search("kinase", "u", "a", limit=2_000)}
    assert late in found and ids[0] not in found and len(found) == 1_200
    await second.aclose()


async def test_cached_vectors_follow_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "vectors.db"
    reader = SQLiteAdapter(path, embedder="default")
    writer = SQLiteAdapter(path, embedder="default")
    await writer.add("Caroline adopted a golden retriever puppy", "u", "a")
    newest = await writer.add("the cat sleeps on the sofa", "u", "a")
    assert len(await reader.search("dog", "u", "a", mode="semantic", limit=10)) == 2  # vectors cached
    assert await writer.delete(newest)
    late = await writer.add("a kitten naps on the couch", "u", "a")
    ids = [h.id for h in await reader.search("cat", "u", "a", mode="semantic", limit=10)]
    assert newest not in ids and late in ids and len(ids) == 2
    await reader.aclose()
    await writer.aclose()


async def test_an_index_saved_by_an_older_analyzer_is_rebuilt_and_resaved(tmp_path: Path) -> None:
    from memkit._retrieval._keyword import ANALYZER

    path = tmp_path / "old.db"
    first = SQLiteAdapter(path, embedder=None)
    dated = await first.add("[9:00 am on 3 June, 2023] I adopted a puppy yesterday", "u", "a")
    await first.add_many([{"content": f"[9:00 am on 3 June, 2023] note {i}", "user_id": "u", "agent_id": "a"}
                          for i in range(1_200)])  # newer: they win every tie
    assert len(await first.search("note", "u", "a", limit=5)) == 5  # built, then saved
    await first.aclose()
    conn = sqlite3.connect(path)
    (blob,) = conn.execute("SELECT data FROM keyword_snapshots").fetchone()
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    # what an earlier memkit saved: no analyzer version, and no date terms in its postings
    header["terms"] = [t if not t.startswith(("ymd", "ym", "y2", "m0", "timeref")) else f"old{i}"
                       for i, t in enumerate(header["terms"])]
    del header["analyzer"]
    raw = json.dumps(header).encode()
    conn.execute("UPDATE keyword_snapshots SET data = ?", (len(raw).to_bytes(8, "little") + raw + blob[8 + size :],))
    conn.commit()
    conn.close()
    second = SQLiteAdapter(path, embedder=None)
    hits = await second.search("What happened on June 2nd 2023?", "u", "a", limit=1)
    assert [h.id for h in hits] == [dated]  # only the rebuilt index knows "yesterday" was 2 June
    await second.aclose()
    conn = sqlite3.connect(path)
    (blob,) = conn.execute("SELECT data FROM keyword_snapshots").fetchone()
    assert json.loads(blob[8 : 8 + int.from_bytes(blob[:8], "little")])["analyzer"] == ANALYZER
    conn.close()
