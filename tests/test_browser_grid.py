"""Interactive frames and scores charts in real JupyterLab and Chromium.

A notebook writes ``tests/_research_runs.py``'s runs into a SQLite file, turns on
``interactive_frames()`` and shows ``runs_frame(mem)``: the test sorts the table by steps, filters it
(a number condition, then a text column), searches every column and pages, all in the page (the
kernel is not asked: the page sends it no message meanwhile), and checks the rows against what the generator
wrote. A second cell marks steps and shows ``marks_chart``, which JupyterLab draws offline.
Screenshots: .artifacts/lab-grid-*.png.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from playwright.sync_api import Browser, Page
from test_browser import browser  # noqa: F401
from test_browser_graph import lab, pytestmark  # noqa: F401

import memkit
from tests._lab_notebook import comm_messages_sent, notebook_page, shot
from tests._research_runs import ExpectedRun, write_runs

RUNS = 60

FRAME = f'''
from memkit.frames import runs_frame
from memkit.widgets import interactive_frames
from tests._research_runs import write_runs

mem = memkit.open("sqlite:///grid.db?embedder=none")
mem.reset()
write_runs(mem, runs={RUNS})
runs = runs_frame(mem)
interactive_frames()
runs
'''

CHART = '''
from memkit.charts import marks_chart
from memkit.frames import traces_frame

steps = traces_frame(mem)
for i, (step_id, row) in enumerate(steps.head(60).iterrows()):
    mem.mark_step(step_id, good=i % 3 != 0, user_id=row.user_id, agent_id=row.agent_id)
print("frame is", type(runs).__mro__[1].__name__, len(runs))
marks_chart(mem, by="model")
'''

GRID = ".memkit-table"


def _expected() -> list[ExpectedRun]:
    with memkit.open("memory://") as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return write_runs(mem, runs=RUNS)


def _column(page: Page, name: str) -> int:
    labels = [t.strip(" ▲▼") for t in page.locator(f"{GRID} thead th").all_inner_texts()]
    return labels.index(name)


def _cells(page: Page, name: str) -> list[str]:
    j = _column(page, name)
    return [row.locator("td").nth(j).inner_text() for row in page.locator(f"{GRID} tbody tr").all()]


def _count(page: Page, text: str) -> None:
    page.wait_for_function("(t) => document.querySelector('.memkit-table .mk-table-count').innerText === t",
                           arg=text, timeout=10_000)


def _look(page: Page, expected: list[ExpectedRun]) -> None:
    page.locator(f"{GRID} tbody tr").first.wait_for(timeout=180_000)
    total = len(expected)
    _count(page, f"rows 1–25 of {total}")
    shot(page, "lab-grid-table")
    before = comm_messages_sent(page)
    # Sorted by steps, most first: a click on the header, then another.
    steps = page.locator(f"{GRID} thead th").nth(_column(page, "steps"))
    steps.click()
    assert _cells(page, "steps")[0] == str(min(r.steps for r in expected))
    steps.click()
    assert [int(c) for c in _cells(page, "steps")] == sorted((r.steps for r in expected), reverse=True)[:25]
    # Filtered by a number condition on one column, then by a word in another.
    page.locator(f"{GRID} select.mk-table-column").select_option("steps")
    page.locator(f"{GRID} .mk-table-filter").fill(">5")
    many = sum(r.steps > 5 for r in expected)
    _count(page, f"rows 1–{min(25, many)} of {many} (filtered from {total})")
    assert all(int(c) > 5 for c in _cells(page, "steps"))
    page.locator(f"{GRID} select.mk-table-column").select_option("status")
    page.locator(f"{GRID} .mk-table-filter").fill("failed")
    failed = sum(r.status == "failed" for r in expected)
    _count(page, f"rows 1–{min(25, failed)} of {failed} (filtered from {total})")
    assert set(_cells(page, "status")) == {"failed"}
    shot(page, "lab-grid-filtered")
    # A word searched in every column: one user's runs; then the next page of them.
    page.locator(f"{GRID} .mk-table-filter").fill("")
    page.locator(f"{GRID} .mk-table-search").fill("bob")  # a name only bob's runs hold, in their user and id
    bob = sum(r.user_id == "bob" for r in expected)
    _count(page, f"rows 1–25 of {bob} (filtered from {total})")
    page.locator(f"{GRID} .mk-table-next").click()
    _count(page, f"rows 26–{min(50, bob)} of {bob} (filtered from {total})")
    assert set(_cells(page, "user_id")) == {"bob"}
    # None of that asked the kernel: the page sent no widget message meanwhile.
    assert comm_messages_sent(page) == before
    # The code still holds a plain DataFrame, and the marks chart is drawn.
    page.get_by_text(f"frame is DataFrame {total}").wait_for(timeout=120_000)
    chart = page.locator(".jp-OutputArea-output .vega-embed")
    chart.wait_for(timeout=60_000)
    chart.scroll_into_view_if_needed()
    assert "Marks by model" in chart.inner_text() or chart.locator("svg, canvas").count()
    shot(page, "lab-grid-chart")


def test_a_frame_sorted_filtered_and_paged_in_the_page(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    expected = _expected()
    with notebook_page(browser, lab, "grid", FRAME, CHART) as page:
        _look(page, expected)
