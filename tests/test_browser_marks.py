"""Marking what a step recalled, as a researcher does it: real JupyterLab, real Chromium, a SQLite file.

A notebook writes a store the way an agent does (memories in the user's namespace, traces
under "system", one run with a step that searched and one without a run id, a hostile
memory) and shows TraceReplay with a step open. Playwright clicks "relevant" and "not
relevant" on two recalled memories (one with a note of hostile markup), marks and clears a
third, and clicks "bad" on the step, then a cell reads the marks back from the store. Screenshot:
.artifacts/lab-marks.png.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from playwright.sync_api import Browser, Locator, Page, expect
from test_browser import ARTIFACTS, PAYLOAD, _guarded_page, _pwned, browser  # noqa: F401
from test_browser_graph import _run_all, lab, pytestmark  # noqa: F401

NOTE = 'wrong sample <b>7</b> "; DROP TABLE marks; --'

BUILD = '''
import memkit
from memkit.traces import ExecutionHistory
from memkit.widgets import TraceReplay

mem = memkit.open("sqlite:///marks.db?embedder=none")
mem.reset()
for text in ("TP53 is mutated in sample 7", "TP53 loss correlates with poor response",
             "sample 7 was sequenced on a NovaSeq", "KRAS G12D found in the pancreatic line", PAYLOAD):
    mem.add(text, user_id="alice", agent_id="bio")
history = ExecutionHistory(memory_provider=mem, workflow_id="triage", agent_id="bio", user_id="system",
                           run_id="run-1")
with history.step("plan", tool="llm"):
    mem.search("TP53 sample", user_id="alice", agent_id="bio", limit=3)
with history.step("answer", tool="llm"):
    pass
panel = TraceReplay(mem)
panel.run = panel.runs[0]["run"]
panel.step = 0
panel
'''
READ = "print('marks:', sorted((m.kind, m.label, m.note) for m in mem.marks()))"


def _notebook(root: Path) -> None:
    cells = [f"PAYLOAD = {PAYLOAD!r}\n{BUILD}", READ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "marks.ipynb")


def _hit(panel: Locator, rank: int) -> Locator:
    """The verdict row under the recalled memory of that rank."""
    return panel.locator(f".mk-hits tr.mk-hit-verdict[data-rank='{rank}']")


def test_marking_recalled_memories_in_jupyterlab(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    url, root = lab
    _notebook(root)
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.set_viewport_size({"width": 1400, "height": 1100})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url.replace("graph.ipynb", "marks.ipynb"))
    try:
        _mark(page)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-marks-failed.png"), full_page=True)
        raise
    assert _pwned(page) == [None] * len(page.frames)
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert outside == []


def _mark(page: Page) -> None:
    panel = page.locator(".memkit-traces").first
    detail = panel.locator(".mk-detail")
    _hit(detail, 1).wait_for(timeout=90_000)
    assert detail.locator(".mk-hits tr.mk-hit").count() == 3 == detail.locator(".mk-hits tr.mk-hit-verdict").count()
    first, second = _hit(detail, 1), _hit(detail, 2)
    assert first.locator(".mk-mark-btn[aria-pressed='true']").count() == 0

    # "relevant" on the best hit, with a note typed first.
    first.locator(".mk-mark-note").fill(NOTE)
    first.locator(".mk-mark-relevant").click()
    saved = detail.locator(".mk-hits tr.mk-hit-verdict[data-rank='1'] .mk-mark-relevant[aria-pressed='true']")
    saved.wait_for(timeout=30_000)
    assert "marked relevant" in _hit(detail, 1).inner_text()
    assert _hit(detail, 1).locator(".mk-mark-note").input_value() == NOTE  # kept as text
    # the kernel says so in the message line a moment after it redraws the buttons
    expect(panel.locator(".mk-message").first).to_contain_text("marked memory", timeout=60_000)

    # "not relevant" on the second; clicking the button does not open the memory.
    _hit(detail, 2).locator(".mk-mark-not_relevant").click()
    detail.locator(".mk-hits tr.mk-hit-verdict[data-rank='2'] .mk-mark-not_relevant[aria-pressed='true']").wait_for(
        timeout=30_000)
    assert "marked not relevant" in _hit(detail, 2).inner_text()
    assert detail.locator(".mk-memory .mk-title").count() == 0
    assert second.count() == 1

    # A misclick undone: "relevant" on the third, then the pressed button again clears it.
    _hit(detail, 3).locator(".mk-mark-relevant").click()
    pressed = detail.locator(".mk-hits tr.mk-hit-verdict[data-rank='3'] .mk-mark-relevant[aria-pressed='true']")
    pressed.wait_for(timeout=30_000)
    pressed.click()
    detail.locator(".mk-hits tr.mk-hit-verdict[data-rank='3'] .mk-mark-relevant[aria-pressed='false']").wait_for(
        timeout=30_000)
    assert "marked" not in _hit(detail, 3).inner_text()

    # The step itself: bad, with a note.
    verdict = detail.locator(".mk-step-verdict")
    verdict.locator(".mk-mark-note").fill("should have looked up KRAS")
    verdict.locator(".mk-mark-bad").click()
    detail.locator(".mk-step-verdict .mk-mark-bad[aria-pressed='true']").wait_for(timeout=30_000)
    assert "marked bad" in detail.locator(".mk-step-verdict").inner_text()
    assert detail.locator("img, script").count() == 0  # the hostile memory and note are text

    page.evaluate("() => document.querySelector('.memkit-traces .mk-detail').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    detail.screenshot(path=str(ARTIFACTS / "lab-marks.png"))

    # Saved in the store: a cell reads them back.
    last = page.locator(".jp-Cell").filter(has_text="print('marks:'")
    last.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    out = page.locator(".jp-OutputArea-output").filter(has_text="marks: [")
    out.wait_for(timeout=30_000)
    text = out.inner_text()
    assert "('memory', 'not_relevant', '')" in text
    assert "('memory', 'relevant', 'wrong sample <b>7</b> \"; DROP TABLE marks; --')" in text
    assert "('step', 'bad', 'should have looked up KRAS')" in text
    assert text.count("('memory',") == 2  # the cleared one is gone
