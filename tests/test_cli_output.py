"""What the ``memkit`` command prints never carries a stored control character to the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memkit
from memkit.cli import main

HOSTILE = "title \x1b]0;pwned\x07 clear \x1b[2J csi \x9b31m bidi \u202egnp.exe"


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}?embedder=none"
    with memkit.open(url) as mem:
        mem.add(HOSTILE, "alice", "bio")
        mem.add_trace("bio", "wf-1", {"tool": "bwa", "step_name": "align", "status": "failed", "step_index": 3,
                                      "duration": 2.1, "error": "Connection reset \x1b[31mred"}, user_id="alice")
    return url


def _assert_inert(text: str) -> None:
    assert not any(ch in text for ch in "\x1b\x07\x9b\u202e"), repr(text)


def test_search_escapes_control_characters(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "search", "title clear", "--user", "alice", "--agent", "bio"]) == 0
    out = capsys.readouterr().out
    _assert_inert(out)
    assert "\\x1b]0;pwned\\x07" in out and "\\u202e" in out  # visible, escaped


def test_search_shows_a_trace_as_a_step(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "search", "bwa", "--user", "alice", "--agent", "bio"]) == 0
    out = capsys.readouterr().out
    _assert_inert(out)
    assert "step 3 · bwa · align · failed · 2.1 s" in out and "[trace]" not in out and "data={" not in out


def test_json_lines_are_valid_and_inert(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "search", "title", "--user", "alice", "--agent", "bio", "--json"]) == 0
    out = capsys.readouterr().out
    _assert_inert(out)
    [line] = out.splitlines()
    assert json.loads(line)["content"] == HOSTILE


def test_errors_escape_what_the_user_typed(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "search", "x", "--user", "alice", "--agent", "bio\x1b[2J"]) != 0
    _assert_inert(capsys.readouterr().err)
