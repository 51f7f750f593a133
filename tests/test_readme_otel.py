"""The README's LangGraph and OpenTelemetry example runs as written and prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base", reason="needs memkit[langgraph]")

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_langgraph_otel_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## LangGraph and OpenTelemetry") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), scope)  # our own README, run as a user would
    assert out.getvalue().splitlines() == ["food {'text': 'Alice is vegetarian'}", "1 1 1"]
    mem = scope["mem"]
    recalls = mem.recalls(user_id="alice", agent_id="assistant")  # type: ignore[attr-defined]
    # The search outside any step and the one inside "plan" are both in the audit.
    assert [(r.workflow_id, r.step_name) for r in recalls] == [("langgraph", "store.search"), ("dinner", "plan")]
    from memkit.widgets import NamespaceBrowser

    browser = NamespaceBrowser(mem)  # type: ignore[arg-type]
    browser.namespace.value = ("alice", "assistant")
    assert any(item.metadata.get("lg_key") == "food" for item in browser.items)
    mem.close()  # type: ignore[attr-defined]
    section_text = section[: section.index("\n## ", 1)]
    assert "46 passed, 0 failed, 0 skipped, and 2 expected failures" in section_text


def test_the_counts_the_readme_gives_are_the_suite_s() -> None:
    """The README's passed/failed/skipped counts for LangGraph's suite are what pytest collects here."""
    import subprocess
    import sys

    suite = Path(__file__).resolve().parent / "langgraph_store"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", "--no-header"],
        capture_output=True, text=True, check=False, cwd=suite.parents[1],
    )
    assert result.stdout.strip().splitlines()[-1].startswith("46 passed, 2 xfailed"), result.stdout[-2000:]
