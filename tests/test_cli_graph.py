"""``memkit graph --html``: a standalone offline page of a namespace or a workflow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import memkit
from memkit._demo import demo_items
from memkit._serve._cli import build_parser
from memkit.cli import main


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    with memkit.open(url) as mem:
        mem.add_many(demo_items())
        mem.add('<img src=x onerror="window.__pwned=1">', "alice", "bioinformatics", {"gene": "TP53"})
    return url


def test_namespace_graph_file(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ns.html"
    assert main(["--url", store, "graph", "--user", "alice", "--agent", "bioinformatics", "--html", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "vis.Network" in text and "memkitGraph(" in text
    assert "namespace alice / bioinformatics" in text
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text)
    assert "<img src=x" not in text
    assert "wrote" in capsys.readouterr().out


def test_whole_store_and_workflow_alone(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    everything, run = tmp_path / "all.html", tmp_path / "run.html"
    assert main(["--url", store, "graph", "--html", str(everything)]) == 0
    said = capsys.readouterr().out
    assert "namespace the whole store" in said and "showing 300 of" in said and "left out:" in said
    assert main(["--url", store, "graph", "--workflow", "variant-calling-alice-1", "--html", str(run)]) == 0
    assert "showing all" in capsys.readouterr().out
    page = run.read_text(encoding="utf-8")
    assert '"label":"2 · bwa"' in page and '"layout":"workflow"' in page


def test_workflow_graph_file_and_cap(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "wf.html"
    argv = ["--url", store, "graph", "--user", "alice", "--agent", "bioinformatics",
            "--workflow", "variant-calling-alice-1", "--max-nodes", "3", "--html", str(out)]
    assert main(argv) == 0
    assert "showing 3 of" in capsys.readouterr().out
    assert "memories" in out.read_text(encoding="utf-8") and "left out" in out.read_text(encoding="utf-8")
    assert "workflow variant-calling-alice-1" in out.read_text(encoding="utf-8")


def test_empty_namespace_is_a_clear_error(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "none.html"
    assert main(["--url", store, "graph", "--user", "nobody", "--agent", "x", "--html", str(out)]) == 2
    assert "nothing to draw" in capsys.readouterr().err
    assert not out.exists()


def test_help_explains_the_command() -> None:
    text = build_parser()._subparsers._group_actions[0].choices["graph"].format_help()  # type: ignore[union-attr]
    for needle in ("--html", "--workflow", "--max-nodes", "loads nothing from the network", "example:"):
        assert needle in text
