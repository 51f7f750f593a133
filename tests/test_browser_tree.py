"""A nested run in TraceReplay, as a researcher sees it: real JupyterLab, real Chromium, a SQLite file.

A notebook records one run the way an agent writes it, with nested ``history.step(...)``
blocks three deep (agent > chain > tools, one tool failing and caught by its chain) next to
a flat run, and shows TraceReplay with the nested run open. The test reads what is drawn:
children indented under their parent, the failed tool red, each parent's rolled-up children's
time, and the chain's caret folding its children away and back. Screenshots:
.artifacts/lab-tree.png (expanded) and .artifacts/lab-tree-folded.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from playwright.sync_api import Browser, Locator, Page
from test_browser import ARTIFACTS, _guarded_page, _pwned, browser  # noqa: F401
from test_browser_graph import _run_all, lab, pytestmark  # noqa: F401

BUILD = '''
import time
import memkit
from memkit.traces import ExecutionHistory
from memkit.widgets import TraceReplay

mem = memkit.open("sqlite:///tree.db?embedder=none")
mem.reset()
history = ExecutionHistory(memory_provider=mem, workflow_id="triage", agent_id="bio", user_id="alice",
                           run_id="run-nested")
with history.step("answer", tool="agent"):
    with history.step("gather", tool="chain"):
        with history.step("look_up", tool="pubmed"):
            time.sleep(0.2)
        try:
            with history.step("fetch", tool="http"):
                time.sleep(0.1)
                raise TimeoutError("remote closed the connection")
        except TimeoutError:
            pass
    with history.step("write", tool="llm"):
        time.sleep(0.05)
flat = ExecutionHistory(memory_provider=mem, workflow_id="flat", agent_id="bio", user_id="alice", run_id="run-flat")
for name in ("plan", "align"):
    with flat.step(name, tool="bwa"):
        time.sleep(0.02)
panel = TraceReplay(mem)
panel.run = next(r["run"] for r in panel.runs if r["workflow_id"] == "triage")
panel
'''
READ = "import json; print('rolled:', json.dumps(panel.timeline['rolled']))"


def _notebook(root: Path) -> None:
    cells = [BUILD, READ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "tree.ipynb")


def _row(timeline: Locator, name: str) -> Locator:
    return timeline.locator(".mk-tl-inner .mk-tl-row").filter(has_text=f" · {name} (")


def _indent(row: Locator) -> float:
    """Where the step's name starts, in pixels from the left of the page."""
    box = row.locator(".mk-tl-name").bounding_box()
    assert box is not None
    return float(box["x"])


def test_a_nested_run_is_a_collapsible_tree_in_jupyterlab(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    url, root = lab
    _notebook(root)
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.set_viewport_size({"width": 1400, "height": 1000})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url.replace("graph.ipynb", "tree.ipynb"))
    try:
        _look(page)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-tree-failed.png"), full_page=True)
        raise
    assert _pwned(page) == [None] * len(page.frames)
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert outside == []


def _look(page: Page) -> None:
    timeline = page.locator(".memkit-traces .mk-timeline").first
    _row(timeline, "answer").wait_for(timeout=90_000)
    rows = timeline.locator(".mk-tl-inner .mk-tl-row")
    names = [t.split(" · ")[1].split(" (")[0] for t in rows.locator(".mk-tl-name").all_inner_texts()]
    assert names == ["answer", "gather", "look_up", "fetch", "write"]  # each parent above its children
    answer, gather, look_up, fetch, write = (_row(timeline, n) for n in names)
    # Indented one level per depth; siblings line up.
    assert _indent(answer) < _indent(gather) < _indent(look_up)
    assert _indent(look_up) == _indent(fetch) and _indent(gather) == _indent(write)
    # Rows stacked top to bottom in that order (no overlap once folded rows are gone).
    tops = [r.bounding_box()["y"] for r in (answer, gather, look_up, fetch, write)]  # type: ignore[index]
    assert tops == sorted(tops) and len(set(tops)) == 5
    # The failed tool is red (bar and status), the rest green.
    bar = fetch.locator(".mk-bar")
    assert bar.get_attribute("data-status") == "failed"
    assert bar.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(198, 40, 40)"
    assert look_up.locator(".mk-bar").evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(46, 125, 50)"
    # Parents show their children's rolled-up time, as the kernel computed it; leaves show none.
    page.get_by_text("rolled: [").wait_for(timeout=60_000)
    printed = page.locator(".jp-OutputArea-output").filter(has_text="rolled: [").inner_text()
    rolled = json.loads(printed.split("rolled: ", 1)[1])
    assert gather.locator(".mk-rollup").inner_text() == f"Σ {rolled[1]}"
    assert answer.locator(".mk-rollup").inner_text() == f"Σ {rolled[0]}"
    assert rolled[1].endswith("ms") and int(rolled[1].split()[0]) >= 300  # look_up 0.2 s + fetch 0.1 s
    assert look_up.locator(".mk-rollup").count() == 0 and write.locator(".mk-rollup").count() == 0
    assert look_up.locator(".mk-caret[data-position]").count() == 0
    timeline.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "lab-tree.png"), clip=_clip(page))
    # The chain's caret folds its two tools away; its sibling moves up; a second click brings them back.
    caret = gather.locator(".mk-caret")
    assert caret.get_attribute("aria-expanded") == "true"
    caret.click()
    page.wait_for_function("() => document.querySelectorAll('.memkit-traces .mk-tl-inner .mk-tl-row').length === 3")
    assert look_up.count() == 0 and fetch.count() == 0
    assert gather.locator(".mk-caret").get_attribute("aria-expanded") == "false"
    assert write.bounding_box()["y"] - gather.bounding_box()["y"] == tops[2] - tops[1]  # type: ignore[index]
    page.screenshot(path=str(ARTIFACTS / "lab-tree-folded.png"), clip=_clip(page))
    assert page.locator(".memkit-traces .mk-detail .mk-title").count() == 0  # folding opened no step
    gather.locator(".mk-caret").click()
    page.wait_for_function("() => document.querySelectorAll('.memkit-traces .mk-tl-inner .mk-tl-row').length === 5")
    assert look_up.is_visible() and fetch.is_visible()
    assert _indent(fetch) > _indent(gather)
    # Clicking a child's row opens that step.
    fetch.click()
    detail = page.locator(".memkit-traces .mk-detail")
    detail.get_by_text("step 3 · fetch").wait_for(timeout=30_000)
    assert "TimeoutError: remote closed the connection" in detail.locator(".mk-error").inner_text()
    # A flat run looks as it always did: no caret, no indentation, no roll-up.
    page.locator(".memkit-traces .mk-runs tr").filter(has_text="flat").first.click()
    _row(timeline, "align").wait_for(timeout=30_000)
    assert timeline.locator(".mk-caret, .mk-rollup, [data-depth]").count() == 0
    assert _indent(_row(timeline, "plan")) == _indent(_row(timeline, "align"))


def _clip(page: Page) -> dict[str, float]:
    box = page.locator(".memkit-traces").first.bounding_box()
    assert box is not None
    return {"x": box["x"], "y": max(box["y"], 0), "width": box["width"], "height": min(box["height"], 900)}
