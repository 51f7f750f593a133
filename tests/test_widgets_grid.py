"""Grid: a DataFrame sent once to the browser, cells it can sort (numbers as numbers, times as ISO text),
the frame left as it is; every frame a notebook shows drawn this way only while asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import memkit
from memkit.frames import runs_frame
from memkit.widgets import Grid, interactive_frames, show

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_cells_keep_what_sorting_needs_and_the_frame_is_untouched() -> None:
    frame = pd.DataFrame({
        "tokens": [120, 5, None], "cost": [0.5, np.inf, 0.25], "ok": [True, False, True],
        "started": pd.to_datetime(["2026-01-02 03:04:05", None, "2025-12-31 00:00:00"], utc=True),
        "text": ["<img src=x onerror=alert(1)>", None, "a\x1bb"],
    }, index=pd.Index(["r1", "r2", "r3"], name="run"))
    before = frame.copy()
    grid = Grid(frame, page_size=10)
    assert [(c["name"], c["kind"]) for c in grid.columns] == [
        ("run", "text"), ("tokens", "number"), ("cost", "number"), ("ok", "bool"), ("started", "time"),
        ("text", "text")]
    assert grid.data[1] == [120.0, 5.0, None] and grid.data[2] == [0.5, None, 0.25]
    assert grid.data[4] == ["2026-01-02T03:04:05+00:00", None, "2025-12-31T00:00:00+00:00"]
    assert grid.data[5][0] == "<img src=x onerror=alert(1)>" and "\x1b" not in grid.data[5][2]
    assert grid.total_rows == 3 and grid.page_size == 10
    pd.testing.assert_frame_equal(frame, before)
    assert show(frame).summary() == "Grid: 3 rows × 5 columns"


def test_a_long_frame_sends_its_first_rows_and_says_how_many_it_holds() -> None:
    grid = Grid(pd.DataFrame({"x": range(50)}), max_rows=20)
    assert grid.data == [list(range(20))] and grid.total_rows == 50
    assert [c["name"] for c in grid.columns] == ["x"]  # a plain row number is not a column


@pytest.mark.parametrize(("arguments", "word"), [
    ((["not", "a", "frame"],), "DataFrame"), ((pd.DataFrame(), ), None),
])
def test_only_a_dataframe_is_shown(arguments: tuple[Any, ...], word: str | None) -> None:
    if word is None:
        assert Grid(*arguments).data == []
        return
    with pytest.raises(memkit.InvalidInputError, match=word):
        Grid(*arguments)


@pytest.mark.parametrize("options", [{"page_size": 0}, {"max_rows": -1}, {"page_size": True}, {"max_rows": "9"}])
def test_bad_sizes_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(memkit.InvalidInputError, match=next(iter(options))):
        Grid(pd.DataFrame({"x": [1]}), **options)


@pytest.fixture
def shell() -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    try:
        yield ip
    finally:
        interactive_frames(False)
        InteractiveShell.clear_instance()


def test_every_frame_a_notebook_shows_is_a_grid_while_asked(shell: Any, tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'g.db'}?embedder=none") as mem:
        mem.add_trace("bot", "wf", {"step_name": "a", "tool": "t", "status": "success", "run_id": "r"}, user_id="u")
        runs = runs_frame(mem)
    assert WIDGET_MIME not in shell.display_formatter.format(runs)[0]
    interactive_frames()
    shown, _ = shell.display_formatter.format(runs)
    assert WIDGET_MIME in shown and shown["text/plain"] == f"Grid: 1 rows × {runs.shape[1]} columns"
    assert type(runs).__name__ == "RunsFrame" and isinstance(runs, pd.DataFrame)  # code still gets the frame
    interactive_frames(False)
    assert WIDGET_MIME not in shell.display_formatter.format(runs)[0]


def test_outside_a_notebook_interactive_frames_says_so() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    assert not InteractiveShell.initialized()
    with pytest.raises(memkit.InvalidInputError, match="IPython"):
        interactive_frames()
