"""The README's marks example runs as written and shows what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_marks_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Mark what was right") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), scope)  # our own README, run as a user would
    marks = scope["mem"].marks(user_id="alice", agent_id="bio")  # type: ignore[attr-defined]
    assert [(m.kind, m.label, m.note) for m in marks] == [
        ("memory", "relevant", ""), ("memory", "not_relevant", "prognosis, not this sample"), ("step", "good", "")]
    result = scope["result"]
    # The new memory outranks the one the step needed: today's retrieval misses it at k=1.
    assert (result.recall_at_k_then, result.recall_at_k, result.mrr) == (1.0, 0.0, 0.0)  # type: ignore[attr-defined]
    printed = out.getvalue()
    assert "prognosis, not this sample" in printed
    assert "recall@1 0.000 (then 1.000), MRR 0.000 (then 1.000)" in printed
    scope["mem"].close()  # type: ignore[attr-defined]
