"""What only the SQLite adapter promises: one file, WAL, migrations, many processes."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import memkit
from memkit import ConfigError, InvalidInputError, Limits, StorageError
from memkit.adapters import SQLiteAdapter
from memkit.adapters._sqlite._schema import SCHEMA_VERSION


async def test_file_is_wal_with_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    adapter = SQLiteAdapter(path)
    await adapter.add("x", "u", "a")
    await adapter.aclose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert tables == {
        "memories", "store_meta", "memory_vectors", "trace_steps",
        "memory_deletions", "sqlite_sequence", "keyword_snapshots", "recalls", "vector_snapshots", "marks",
    }


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(ConfigError, match="upgrade memkit"):
        SQLiteAdapter(path)


def test_not_a_database_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="not a usable memkit database"):
        SQLiteAdapter(path)


def test_reopening_does_not_rerun_migrations(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    for _ in range(3):
        SQLiteAdapter(path).close()
    conn = sqlite3.connect(path)
    row = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'").fetchone()
    assert row[0] == str(SCHEMA_VERSION)


async def test_closed_adapter_raises_storage_error(tmp_path: Path) -> None:
    adapter = SQLiteAdapter(tmp_path / "m.db")
    await adapter.aclose()
    with pytest.raises(StorageError, match="closed"):
        await adapter.add("x", "u", "a")
    await adapter.aclose()  # idempotent


async def test_custom_limits_apply(tmp_path: Path) -> None:
    adapter = SQLiteAdapter(tmp_path / "m.db", limits=Limits(max_content_chars=10, max_limit=3))
    await adapter.add("0123456789", "u", "a")
    with pytest.raises(InvalidInputError, match="limit is 10"):
        await adapter.add("0123456789x", "u", "a")
    with pytest.raises(InvalidInputError, match="between 1 and 3"):
        await adapter.get_all("u", "a", limit=4)
    assert len(await adapter.get_all("u", "a", limit=3)) == 1
    await adapter.aclose()


async def test_add_many_progress_bar_and_single_transaction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    adapter = SQLiteAdapter(tmp_path / "m.db")
    rows = [{"content": f"row {i}", "user_id": "u", "agent_id": "a"} for i in range(25_000)]
    ids = await adapter.add_many(rows, progress=True)
    assert len(ids) == 25_000
    assert "add_many" in capsys.readouterr().err
    # a bad last row rolls back the whole batch, even across internal chunks
    rows = [{"content": f"more {i}", "user_id": "u", "agent_id": "a"} for i in range(15_000)]
    rows.append({"content": "dup", "user_id": "u", "agent_id": "a", "id": ids[0]})
    with pytest.raises(InvalidInputError):
        await adapter.add_many(rows)
    assert (await adapter.stats()).memories == 25_000
    await adapter.aclose()


def test_several_processes_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    SQLiteAdapter(path).close()
    script = textwrap.dedent(
        f"""
        import sys, memkit
        mem = memkit.open("sqlite:///{path}")
        for i in range(60):
            mem.add(f"process {{sys.argv[1]}} note {{i}}", "u", "p" + sys.argv[1])
        mem.add_many([{{"content": f"batch {{i}}", "user_id": "u", "agent_id": "p" + sys.argv[1]}} for i in range(200)])
        mem.close()
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with memkit.open(f"sqlite:///{path}") as mem:
        counts = {ns.agent_id: ns.count for ns in mem.namespaces()}
        assert counts == {f"p{n}": 260 for n in range(4)}
        assert len(mem.search("note", "u", "p2", limit=100)) == 60


def test_several_processes_create_one_new_file(tmp_path: Path) -> None:
    """Migrations race safely: six processes open the same brand-new file at once."""
    path = tmp_path / "new.db"
    script = f"import memkit; m = memkit.open('sqlite:///{path}'); m.add('hi', 'u', 'a'); m.close()"
    procs = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(6)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 6
    with memkit.open(f"sqlite:///{path}") as mem:
        assert mem.stats().memories == 6


async def test_deleted_memories_leave_the_keyword_index(tmp_path: Path) -> None:
    adapter = SQLiteAdapter(tmp_path / "m.db")
    gone = await adapter.add("ephemeral kinase", "u", "a")
    await adapter.add("durable kinase", "u", "a")
    await adapter.delete(gone)
    assert [h.content for h in await adapter.search("kinase", "u", "a")] == ["durable kinase"]
    await adapter.reset()
    assert await adapter.search("kinase", "u", "a") == []
    await adapter.aclose()


async def test_keyword_index_follows_other_processes(tmp_path: Path) -> None:
    """A search sees rows another process added or deleted after this process built its index."""
    path = tmp_path / "shared.db"
    adapter = SQLiteAdapter(path)
    first = await adapter.add("kinase screen one", "u", "a")
    assert [h.id for h in await adapter.search("kinase", "u", "a")] == [first]  # index built now
    script = textwrap.dedent(
        f"""
        import memkit
        with memkit.open("sqlite:///{path}") as mem:
            mem.add("kinase screen two", "u", "a")
            mem.delete({first!r})
            mem.add("kinase elsewhere", "u", "other")
        """
    )
    await asyncio.to_thread(subprocess.run, [sys.executable, "-c", script], check=True, timeout=120)
    hits = await adapter.search("kinase", "u", "a", limit=10)
    assert [h.content for h in hits] == ["kinase screen two"]
    await adapter.aclose()


async def test_index_memory_is_bounded(tmp_path: Path) -> None:
    adapter = SQLiteAdapter(tmp_path / "m.db", max_indexed=50)
    for agent in ("a", "b", "c"):
        await adapter.add_many([{"content": f"{agent} note {i}", "user_id": "u", "agent_id": agent} for i in range(30)])
        assert len(await adapter.search("note", "u", agent, limit=100)) == 30
    assert len(adapter._keywords) == 1  # the two least recently searched were dropped
    assert len(await adapter.search("note", "u", "a", limit=100)) == 30  # and rebuild on demand
    await adapter.aclose()


async def test_porter_stemming_matches_word_forms(tmp_path: Path) -> None:
    adapter = SQLiteAdapter(tmp_path / "m.db")
    target = await adapter.add("The aligner mapped reads to the reference", "u", "a")
    await adapter.add("Unrelated lunch note", "u", "a")
    assert [h.id for h in await adapter.search("mapping read", "u", "a")] == [target]
    await adapter.aclose()


async def test_a_full_database_reports_itself_full_and_keeps_what_it_had(tmp_path: Path) -> None:
    # A full disk simulated by capping the file's pages (mounting a small tmpfs needs
    # privileges a test run should not assume); SQLite answers both with SQLITE_FULL.
    mem = SQLiteAdapter(tmp_path / "full.db", embedder=None)
    kept = await mem.add("kept before the disk filled", "u", "a")
    assert mem._conn is not None
    pages = mem._conn.execute("PRAGMA page_count").fetchone()[0]
    mem._conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    big = [{"content": "x" * 4_000 + str(i), "user_id": "u", "agent_id": "a"} for i in range(50)]
    with pytest.raises(StorageError, match="database or disk is full"):
        await mem.add_many(big)
    with pytest.raises(StorageError, match="database or disk is full"):
        await mem.add("y" * 90_000, "u", "a")
    assert [h.id for h in await mem.get_all("u", "a")] == [kept]
    mem._conn.execute(f"PRAGMA max_page_count = {2**30}")
    assert len(await mem.add_many(big)) == 50  # the connection is usable again
    await mem.aclose()


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs: a disk that really fills (mounting it needs root, as in CI's container)."""
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)  # lazy: a failed test may hold the file


async def test_a_full_disk_reports_itself_full(small_filesystem: Path) -> None:
    mem = SQLiteAdapter(small_filesystem / "full.db", embedder=None)
    kept = await mem.add("kept before the disk filled", "u", "a")
    written = 1
    with pytest.raises(StorageError, match="database or disk is full"):
        for _ in range(100):
            batch = [{"content": "x" * 4_000 + str(i), "user_id": "u", "agent_id": "a"} for i in range(20)]
            written += len(await mem.add_many(batch))
    items = await mem.get_all("u", "a", limit=10_000)
    assert len(items) == written and kept in {i.id for i in items}  # nothing acknowledged was lost
    await mem.aclose()
