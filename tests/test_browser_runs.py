"""The run list of a store written the way research agents write it, in real JupyterLab and Chromium.

A notebook writes ``tests/_research_runs.py``'s 303 runs into a SQLite file and shows TraceReplay.
The test reads what is drawn, as a researcher would: the run list (a run without start times reads
"Σ" with no start, not milliseconds on the upload day), an ``ok``/``error`` run that failed, a run
retried through per-attempt rows, and a traceback's exception as its first error. Screenshots:
.artifacts/lab-runs-*.png.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Locator, Page
from test_browser import ARTIFACTS, browser  # noqa: F401
from test_browser_graph import lab, pytestmark  # noqa: F401

import memkit
from memkit._core._runs import run_key
from tests._lab_notebook import notebook_page, row_cells
from tests._research_runs import ExpectedRun, write_runs

TESTS = Path(__file__).parent

BUILD = '''
from memkit.widgets import TraceReplay
from tests._research_runs import write_runs

mem = memkit.open("sqlite:///runs.db?embedder=none")
mem.reset()
write_runs(mem)
panel = TraceReplay(mem)
panel
'''


def _expected() -> list[ExpectedRun]:
    import warnings

    with memkit.open("memory://") as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return write_runs(mem)  # the same seed: the runs the notebook writes


def _find(page: Page, run: ExpectedRun) -> Locator:
    """Narrow the list to one run with the text filter (its run id) and the user filter."""
    text = page.locator(".memkit-traces .mk-filter-text")
    text.fill(run.run_id)
    text.press("Enter")
    page.locator(".memkit-traces select.mk-filter-user_id").select_option(run.user_id)
    page.wait_for_function(
        """([runId, user]) => { const rows = document.querySelectorAll('.memkit-traces .mk-runs tbody tr');
           return rows.length === 1 && rows[0].innerText.includes(runId) && rows[0].innerText.includes(user); }""",
        arg=[run.run_id, run.user_id], timeout=30_000)
    return page.locator(".memkit-traces .mk-runs tbody tr").first


def _look(page: Page, expected: list[ExpectedRun]) -> None:
    runs = page.locator(".memkit-traces .mk-runs tbody tr")
    runs.first.wait_for(timeout=180_000)
    page.screenshot(path=str(ARTIFACTS / "lab-runs-list.png"), full_page=False)
    picks = {
        "no start": next(r for r in expected if r.timing == "duration_ms" and r.status == "success"),
        "no timing": next(r for r in expected if r.timing == "none" and r.status == "success"),
        "ok-error": next(r for r in expected if r.vocabulary == "ok/error" and r.status == "failed"),
        "retried": next(r for r in expected if r.retries and r.status == "success" and r.duration_kind == "wall"),
        "traceback": next(r for r in expected if r.first_error and r.first_error.startswith("Traceback")),
    }
    for name, run in picks.items():
        row = _find(page, run)
        cells = row_cells(row)
        assert cells["status"] == run.status, (name, cells)
        assert cells["retries"] == str(run.retries) and cells["failed"] == str(run.failed_steps), (name, cells)
        if run.duration_kind == "sum of steps":
            assert cells["duration"].startswith("Σ ") and cells["started"] == "", (name, cells)
        elif run.duration_kind == "unknown":
            assert cells["duration"] == "" and cells["started"] == "", (name, cells)
        else:
            assert cells["started"].startswith("2026-09-"), (name, cells)
        if run.error_headline is not None:
            assert cells["first error"].rstrip("…") and run.error_headline.startswith(
                cells["first error"].rstrip("…")), (name, cells)
            assert "Traceback" not in cells["first error"]
        row.click()
        page.locator(".memkit-traces .mk-timeline").get_by_text(f"run {run_key(*run.ids)}").wait_for(timeout=30_000)
        caption = page.locator(".memkit-traces .mk-timeline").inner_text()
        assert f"{run.steps} steps" in caption, (name, caption)
        if run.duration_kind == "unknown":
            page.locator(".memkit-traces .mk-timing-note").wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / f"lab-runs-{name.replace(' ', '-')}.png"), full_page=False)


def test_the_run_list_of_a_research_store_in_jupyterlab(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    expected = _expected()
    with notebook_page(browser, lab, "runs", BUILD) as page:
        _look(page, expected)
