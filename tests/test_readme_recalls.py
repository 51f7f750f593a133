"""The README's recalls example runs as written and shows what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_recalls_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## What did the agent know? Recalls") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), scope)  # our own README, run as a user would
    df = scope["df"]
    assert df.step_name.tolist() == ["plan", "plan"]  # type: ignore[attr-defined]
    assert df["rank"].tolist() == [1, 2]  # type: ignore[index]
    changes = scope["changes"].set_index("memory_id")  # type: ignore[attr-defined]
    assert sorted(changes.change) == ["down", "down", "new"]
    assert changes[changes.change == "new"].new_rank.tolist() == [1]
    printed = out.getvalue()
    assert "TP53 is mutated in sample 7" in printed and "recalled" in printed
    scope["mem"].close()  # type: ignore[attr-defined]
