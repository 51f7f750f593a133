"""The README's hybrid-search example runs as written."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_hybrid_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Semantic and hybrid search") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), {})  # our own README, run as a user would
    printed = out.getvalue()
    assert "golden retriever" in printed.splitlines()[0]
    assert "semantic" in printed.splitlines()[0]
    assert "Relevant memories:" in printed and "golden retriever" in printed.split("Relevant memories:")[1]
    assert os.path.exists(tmp_path / "data" / "memory.db")
