"""Shared by the tests that compare a fresh process's answers on a SQLite file with the answers of a
copy of that file whose search snapshots were removed (every index rebuilt from the rows)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest


def run_python(script: str, *args: object, timeout: float = 900) -> str:
    """``script`` in a fresh interpreter (a real process on the real file); its stdout."""
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], check=True, capture_output=True,
                          text=True, timeout=timeout).stdout


def read(reader: str, path: Path) -> dict[str, Any]:
    """What ``reader`` (a script printing one JSON object with an ``answers`` key) says of ``path``."""
    result: dict[str, Any] = json.loads(run_python(reader, path))
    return result


def rebuilt(reader: str, path: Path, tmp: Path) -> dict[str, Any]:
    """The answers of a copy of the store without any snapshot: every index built from the rows."""
    copy = tmp / "rebuilt.db"
    for leftover in tmp.glob("rebuilt.db*"):  # from an earlier comparison
        leftover.unlink()
    copy_without_snapshots(path, copy)
    answers: dict[str, Any] = read(reader, copy)["answers"]
    return answers


def copy_without_snapshots(path: Path, copy: Path) -> None:
    """A copy of the store at ``path`` whose keyword and vector snapshots are gone."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("VACUUM INTO ?", (str(copy),))
    finally:
        conn.close()
    conn = sqlite3.connect(copy)
    conn.execute("DELETE FROM keyword_snapshots")
    conn.execute("DELETE FROM vector_snapshots")
    conn.commit()
    conn.close()


def kill_when_signalled(script: str, args: list[str], signal_file: Path, timeout: float) -> None:
    """Run ``script`` in a fresh interpreter and kill -9 it once it has created ``signal_file``."""
    victim = subprocess.Popen([sys.executable, "-c", script, *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    while not signal_file.exists():
        assert victim.poll() is None, victim.communicate()[1]
        assert time.time() < deadline, "the writer never reached its save"
        time.sleep(0.1)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=60)


def assert_same(answers: dict[str, Any], expected: dict[str, Any], *, nonempty: bool = False) -> None:
    """Same ids in the same order and the same scores; hybrid scores to the last bits only (fused
    with the namespace's moments, which a snapshot and a rebuild sum in different orders)."""
    assert answers.keys() == expected.keys()
    for name, hits in answers.items():
        if nonempty:
            assert hits, name
        assert [h[0] for h in hits] == [h[0] for h in expected[name]], name
        if "/hybrid/" in name:
            assert [h[1] for h in hits] == pytest.approx([h[1] for h in expected[name]], rel=1e-9, abs=1e-12), name
        else:
            assert hits == expected[name], name
