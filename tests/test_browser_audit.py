"""Auditing an agent in real JupyterLab and Chromium, as a Phoenix or Langfuse user would.

A notebook writes ``tests/_research_runs.py``'s runs (mixed usage spellings, steps without usage,
chains that report their calls' tokens again) plus one run whose fetch step got a 404 into a SQLite
file, and shows TraceReplay with a price table. The test reads what is drawn: the run list's tokens,
cost and model columns against what the generator wrote, the run header's usage, a step's usage facts
and its attribute table (searched, a long value unfolded), and a payload search that finds the run by
a word in its tool's output. Screenshots: .artifacts/lab-audit-*.png.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from playwright.sync_api import Browser, Page
from test_browser import ARTIFACTS, browser  # noqa: F401
from test_browser_graph import lab, pytestmark  # noqa: F401

import memkit
from memkit._core._runs import run_key
from tests._lab_notebook import notebook_page, row_cells
from tests._research_runs import ExpectedRun, write_runs

TESTS = Path(__file__).parent
RUNS = 40
WORD = "GENE_NOT_FOUND_4O4"

BUILD = f'''
from memkit.widgets import TraceReplay
from tests._research_runs import PRICES, write_runs

mem = memkit.open("sqlite:///audit.db?embedder=none")
mem.reset()
write_runs(mem, runs={RUNS})
mem.add_trace("bio", "lookup", {{"step_name": "fetch gene", "tool": "fetch", "step_index": 0, "run_id": "needle",
    "status": "failed", "error": "HTTP 404", "duration": 0.4,
    "result": {{"status": 404, "body": "{WORD}: no record for BRCA3"}}}}, user_id="carol")
panel = TraceReplay(mem, prices=PRICES)
panel
'''


def _expected() -> list[ExpectedRun]:
    with memkit.open("memory://") as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return write_runs(mem, runs=RUNS)  # the same seed: the runs the notebook writes


def _cells(page: Page, row_index: int = 0) -> dict[str, str]:
    return row_cells(page.locator(".memkit-traces .mk-runs tbody tr").nth(row_index))


def _only(page: Page, text: str) -> None:
    page.wait_for_function(
        """(t) => { const rows = document.querySelectorAll('.memkit-traces .mk-runs tbody tr');
           return rows.length === 1 && rows[0].innerText.includes(t); }""", arg=text, timeout=30_000)


def _filter(page: Page, key: str, value: str) -> None:
    box = page.locator(f".memkit-traces .mk-filter-{key}")
    box.fill(value)
    box.press("Enter")


def _look(page: Page, expected: list[ExpectedRun]) -> None:
    page.locator(".memkit-traces .mk-runs tbody tr").first.wait_for(timeout=180_000)
    page.screenshot(path=str(ARTIFACTS / "lab-audit-list.png"), full_page=False)
    # A nested run whose chain reports its call's tokens again: the list counts the call once.
    run = next(r for r in expected if r.nested and r.usage_spelling not in ("none",) and r.tokens_total
               and r.steps > 3)
    key = run_key(*run.ids)
    _filter(page, "text", run.run_id)
    page.locator(".memkit-traces select.mk-filter-user_id").select_option(run.user_id)
    _only(page, run.run_id)
    cells = _cells(page)
    assert cells["tokens"] == f"{run.tokens_total:,}", (key, cells)
    assert run.cost is not None and cells["cost"] == f"${run.cost:.4g}", (key, cells)
    assert cells["model"] == ", ".join(sorted(run.models)), (key, cells)
    page.locator(".memkit-traces .mk-runs tbody tr").first.click()
    header = page.locator(".memkit-traces .mk-timeline .mk-usage")
    header.wait_for(timeout=30_000)
    assert f"{run.tokens_total:,} tokens" in header.inner_text()
    page.screenshot(path=str(ARTIFACTS / "lab-audit-run.png"), full_page=False)
    # The first step recorded its own model, tokens and cost: its detail says so, and lists every key.
    page.locator('.memkit-traces .mk-tl-inner .mk-tl-row[data-position="0"]').click()
    facts = page.locator(".memkit-traces .mk-detail .mk-facts").first
    facts.get_by_text("in run totals").wait_for(timeout=30_000)
    assert "gpt-4o-mini" in facts.inner_text() and f"{120 + expected.index(run) + 40:,} tokens" in facts.inner_text()
    table = page.locator(".memkit-traces .mk-attr-table")
    keys = table.locator("tr th").all_inner_texts()
    assert {"prompt", "tokens.prompt", "tokens.completion", "cost", "parameters.query", "step_name"} <= set(keys)
    search = page.locator(".memkit-traces .mk-attr-search")
    search.fill("tokens")
    page.wait_for_function("() => [...document.querySelectorAll('.memkit-traces .mk-attr-table tr th')]"
                           ".every((th) => th.closest('tr').innerText.toLowerCase().includes('tokens'))")
    assert set(table.locator("tr th").all_inner_texts()) == {"tokens.prompt", "tokens.completion"}
    search.fill("")
    detail = page.locator(".memkit-traces .mk-detail")
    detail.scroll_into_view_if_needed()
    page.locator(".memkit-traces .mk-attributes").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "lab-audit-attributes.png"), full_page=False)
    # A payload search finds the run whose fetch step's output holds the word, and only it.
    page.locator(".memkit-traces button", has_text="clear").first.click()
    page.wait_for_function("() => document.querySelectorAll('.memkit-traces .mk-runs tbody tr').length > 1")
    _filter(page, "payload", WORD)
    _only(page, "needle")
    assert _cells(page)["user"] == "carol" and _cells(page)["status"] == "failed"
    page.screenshot(path=str(ARTIFACTS / "lab-audit-payload.png"), full_page=False)


def test_usage_attributes_and_payload_search_in_jupyterlab(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    expected = _expected()
    with notebook_page(browser, lab, "audit", BUILD) as page:
        _look(page, expected)
