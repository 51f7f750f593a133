"""An agent built on the seed's first design keeps a TinyDB JSON file at ``data/memory.db``.

memkit names that file and what it is instead of SQLite's "file is not a database", leaves it
untouched, and imports its key-value records (``memkit import --tinydb``, ``import_tinydb``).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import memkit
from memkit import ConfigError, InvalidInputError
from memkit.cli import main
from memkit.tools import MemoryTools, import_tinydb

# The seed's own example of its database file (seed 001, "Database Schema Validation").
SEED_FILE = {
    "_default": {
        "1": {"run_id": "llama3-experiment-001", "key": "task_status", "value": "in_progress"},
        "2": {"run_id": "llama3-experiment-001", "key": "findings", "value": "discovered pattern X"},
        "3": {"run_id": "different-run", "key": "task_status", "value": "complete"},
    }
}


@pytest.fixture
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMKIT_URL", raising=False)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "memory.db").write_text(json.dumps(SEED_FILE))
    return tmp_path


def test_a_tinydb_file_at_the_default_path_is_named_and_left_untouched(agent_dir: Path) -> None:
    before = (agent_dir / "data" / "memory.db").read_bytes()
    for opening in (memkit.open, MemoryTools, lambda: memkit.open("sqlite:///data/memory.db")):
        with pytest.raises(ConfigError) as info:
            opening()
        message = str(info.value)
        assert "'data/memory.db' is a TinyDB JSON file (3 records)" in message, message
        assert "import --tinydb data/memory.db.tinydb.json" in message, message
    assert (agent_dir / "data" / "memory.db").read_bytes() == before
    assert sorted(p.name for p in (agent_dir / "data").iterdir()) == ["memory.db"]


def test_other_files_sqlite_cannot_read_are_still_named(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00\x01 not json, not sqlite" * 100)
    with pytest.raises(ConfigError, match="is not a usable memkit database: file is not a database"):
        memkit.open(f"sqlite:///{junk}")
    with pytest.raises(ConfigError, match="is not a usable memkit database: file is not a database"):
        MemoryTools(junk)


def test_the_command_the_error_offers_imports_every_record_once(agent_dir: Path) -> None:
    (agent_dir / "data" / "memory.db").rename(agent_dir / "data" / "memory.db.tinydb.json")
    out = io.StringIO()
    command = ["--url", "sqlite:///data/memory.db", "import", "--tinydb", "data/memory.db.tinydb.json"]
    with contextlib.redirect_stdout(out):
        assert main(command) == 0
        assert main(command) == 0  # again: nothing new
    assert out.getvalue().splitlines()[0].startswith("Imported 3 key-value records from data/memory.db.tinydb.json")
    assert out.getvalue().splitlines()[1].startswith("Imported 0 key-value records")
    with MemoryTools(run_id="llama3-experiment-001") as tools:
        assert tools.list() == "task_status, findings"
        assert tools.read("findings") == "discovered pattern X"
    with MemoryTools(run_id="different-run") as tools:
        assert tools.read("task_status") == "complete"
    with memkit.open() as mem:  # the same file is the agent's memkit store too
        assert mem.stats().memories == 0


def test_an_import_is_all_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "kv.db"
    with MemoryTools(target, "different-run") as tools:
        tools.write("task_status", "abandoned")
    source = tmp_path / "old.json"
    source.write_text(json.dumps(SEED_FILE))
    with pytest.raises(InvalidInputError, match="run 'different-run' already holds key 'task_status'"):
        import_tinydb(source, target)
    broken = {"_default": {**SEED_FILE["_default"], "4": {"run_id": "r", "key": "k", "value": 7}}}
    source.write_text(json.dumps(broken))
    with pytest.raises(InvalidInputError, match=r"record 4 of table '_default' .*value must be a string"):
        import_tinydb(source, target)
    source.write_text('{"_default": [1, 2]}')
    with pytest.raises(InvalidInputError, match="is not a TinyDB JSON file"):
        import_tinydb(source, target)
    with MemoryTools(target, "llama3-experiment-001") as tools:
        assert tools.list() == "No keys stored"
    with MemoryTools(target, "different-run") as tools:
        assert tools.list() == "task_status" and tools.read("task_status") == "abandoned"
