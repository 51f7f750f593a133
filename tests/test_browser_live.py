"""A run another process writes appears in a followed TraceReplay in real JupyterLab, and its timeline grows.

The notebook opens a SQLite file, writes one finished run and shows ``TraceReplay(mem, follow=True)``;
then this test process (another process than the kernel) writes a run step by step. The test reads the
page as a researcher looks at it: the new run listed and marked live, and, once opened, its timeline
gaining each step while the last one is still running. Screenshots: .artifacts/lab-live-*.png.
"""

from __future__ import annotations

import time
from pathlib import Path

from playwright.sync_api import Browser, Page
from test_browser import browser  # noqa: F401
from test_browser_graph import lab, pytestmark  # noqa: F401

import memkit
from tests._lab_notebook import notebook_page, row_cells, shot
from tests.test_trace_follow import _step

BUILD = '''
from memkit.widgets import TraceReplay
from tests.test_trace_follow import _step

mem = memkit.open("sqlite:///live.db?embedder=none")
mem.reset()
mem.add_trace("bot", "review", _step(0, run="yesterday"), user_id="alice")
panel = TraceReplay(mem, follow=True)
panel
'''
STEPS = 8
LIVE = "alice/bot/review/live-1"


def _steps_drawn(page: Page) -> int:
    rows = page.locator(".memkit-traces .mk-timeline .mk-tl-rows")
    return int(rows.get_attribute("data-steps") or 0) if rows.count() else 0


def _look(page: Page, store: Path) -> None:
    runs = page.locator(".memkit-traces .mk-runs tbody tr")
    runs.first.wait_for(timeout=180_000)
    page.locator(".memkit-traces .mk-following").wait_for(timeout=30_000)
    assert runs.count() == 1
    drawn: list[int] = []
    with memkit.open(f"sqlite:///{store}?embedder=none") as writer:
        for i in range(STEPS):
            written = time.monotonic()
            writer.add_trace("bot", "review", _step(i, "running" if i == STEPS - 1 else "success"), user_id="alice")
            if i == 0:  # the new run is listed, marked live, without anyone refreshing
                page.locator(f'.memkit-traces .mk-runs tbody tr.mk-live[data-key="{LIVE}"]').wait_for(timeout=10_000)
                shot(page, "lab-live-appeared")
                page.locator(f'.memkit-traces .mk-runs tbody tr[data-key="{LIVE}"]').click()
            page.wait_for_function(
                "(n) => { const r = document.querySelector('.memkit-traces .mk-timeline .mk-tl-rows');"
                " return r && Number(r.dataset.steps) >= n; }", arg=i + 1, timeout=10_000)
            drawn.append(_steps_drawn(page))
            assert time.monotonic() - written < 10
            if i == STEPS // 2:
                shot(page, "lab-live-growing")
            time.sleep(0.3)
    assert drawn == list(range(1, STEPS + 1)), drawn  # one more bar for each step written
    row = page.locator(f'.memkit-traces .mk-runs tbody tr[data-key="{LIVE}"]')
    page.wait_for_function(
        "() => document.querySelector('.memkit-traces .mk-timeline').innerText.includes('running')", timeout=10_000)
    cells = row_cells(row)
    assert cells["status"].split() == ["running", "●", "live"] and cells["steps"] == str(STEPS), cells
    assert "mk-live" in (row.get_attribute("class") or "")
    shot(page, "lab-live-running")


def test_a_run_written_by_another_process_appears_and_grows(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    with notebook_page(browser, lab, "live", BUILD) as page:
        _look(page, lab[1] / "live.db")
