"""The README's quick start and command-line examples run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def _blocks(title: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _section(title), flags=re.S)


def test_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMKIT_URL", raising=False)
    sync_block, async_block = _blocks("Quick start", "python")
    scope: dict[str, object] = {}
    exec(compile(sync_block, "README.md", "exec"), scope)
    hits = scope["hits"]
    assert hits and hits[0].content == "BLAST of TP53 returned 12 homologs"  # type: ignore[index]
    assert hits[0].score_details["mode"] == "keyword"  # type: ignore[index]
    assert (tmp_path / "data" / "memory.db").exists() and (tmp_path / "runs.db").exists()

    exec(compile(async_block, "README.md", "exec"), {})
    with memkit_open(tmp_path / "runs.db") as mem:
        assert mem.search("note", "alice", "bio")[0].content == "note"


def memkit_open(path: Path):  # type: ignore[no-untyped-def]
    import memkit

    return memkit.open(f"sqlite:///{path}")


def test_command_line_examples_run(tmp_path: Path) -> None:
    env = {**os.environ, "MEMKIT_URL": f"sqlite:///{tmp_path}/cli.db"}
    memkit_cli = [sys.executable, "-m", "memkit"]
    commands = [line for block in _blocks("Command line", "bash") for line in block.splitlines() if line.strip()]
    assert commands[0].startswith("memkit demo")
    for line in commands:
        shell_words = re.findall(r"'[^']*'|\"[^\"]*\"|\S+", line.split("  #")[0])
        args = [w[1:-1] if w[0] in "'\"" else w for w in shell_words][1:]
        result = subprocess.run([*memkit_cli, *args], env=env, cwd=tmp_path, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, (line, result.stderr)
        assert result.stdout.strip(), line
        if args[0] == "search":
            gene = json.loads(args[args.index("--filters") + 1])["gene"]
            assert all(gene in row for row in result.stdout.splitlines()), result.stdout
