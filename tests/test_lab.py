"""`make lab` for real: JupyterLab on 127.0.0.1, the panels run in headless Chromium, nothing fetched outside.

The notebooks are copied to a temporary root (LAB_DIR) and the demo store goes there
too (LAB_DB), so neither JupyterLab's autosave nor the test writes into the checkout;
``make lab-serve`` installs nothing. Screenshots: .artifacts/lab*.png; the main ones
are copied to docs/img/ by hand after looking at them.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nbformat
import pytest
from _lab_server import LabServer, lab_url
from playwright.sync_api import Locator, Page, Route, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# Outside CI a developer may lack the browser; under CI (CI=true) a missing one must fail the run.
_NO_CHROMIUM = not Path(CHROMIUM).exists() and not os.environ.get("CI")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_NO_CHROMIUM, reason="needs the Debian package chromium (make install-test)"),
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_make_lab_serves_the_tour_on_loopback(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    nbformat.write(_views_notebook(), tmp_path / "notebooks" / "views.ipynb")
    nbformat.write(_timing_notebook(), tmp_path / "notebooks" / "timing.ipynb")
    port = _free_port()
    env = {**os.environ, "BROWSER": "true", "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    db = tmp_path / "memory.db"
    cmd = ["make", "-C", str(ROOT), "lab-serve", f"LAB_PORT={port}", f"LAB_DIR={tmp_path}",
           f"LAB_DB={db}"]
    with LabServer(cmd, tmp_path / "lab.log", lab_url(port), env=env) as server:
        url = server.url
        assert db.stat().st_size > 0  # make lab loaded the demo store
        token = url.split("token=")[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks/00_tour.ipynb?token={token}") as r:
            assert r.status == 200
        _only_loopback(port)
        # ?reset: start from an empty workspace, whatever an earlier session left open
        _run_the_tour(url.replace("/lab?", "/lab/tree/notebooks/00_tour.ipynb?reset&"))
        _check_the_views(url.replace("/lab?", "/lab/tree/notebooks/views.ipynb?reset&"))
        _check_timing(url.replace("/lab?", "/lab/tree/notebooks/timing.ipynb?reset&"))


def _only_loopback(port: int) -> None:
    """The server must not answer on the machine's other addresses."""
    try:
        others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    except socket.gaierror:
        others = set()
    for address in others - {"127.0.0.1"}:
        if address.startswith("127."):
            continue
        with socket.socket() as s, pytest.raises(OSError):
            s.settimeout(2)
            s.connect((address, port))


@contextmanager
def _lab_page(url: str, width: int, height: int) -> Iterator[Page]:
    """JupyterLab at ``url`` in headless Chromium with its kernel idle; any request that would leave
    loopback is refused, and the run fails if one was made."""
    outside: list[str] = []

    def gate(route: Route) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme in ("data", "about", "blob") or parts.hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            context.set_default_timeout(60_000)  # generous: the machine may be loaded
            context.route("**/*", gate)
            page = context.new_page()
            page.goto(url)
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=90_000)
            _no_news(page)
            yield page
        finally:
            browser.close()
    assert outside == []


def _run_the_tour(url: str) -> None:
    with _lab_page(url, 1400, 1000) as page:
        page.keyboard.press("Escape")
        page.click(".jp-Notebook")
        page.get_by_text("Run", exact=True).first.click()
        page.get_by_text("Run All Cells", exact=True).first.click()
        # The dashboard renders as live widgets; the last code cell draws the graph.
        try:
            page.wait_for_selector(".widget-tab", timeout=120_000)
        except Exception:
            (ROOT / ".artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / ".artifacts" / "lab-failed.png"))
            raise
        page.locator(".memkit-graph[data-settled='1']").last.wait_for(state="attached", timeout=120_000)
        page.locator(".widget-tab").first.scroll_into_view_if_needed()
        page.wait_for_timeout(1500)
        text = page.locator(".widget-tab").first.inner_text()
        assert "9 namespaces, 271 memories and 67 trace steps" in text and "best hybrid matches" in text
        assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
        (ROOT / ".artifacts").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / ".artifacts" / "lab.png"))
        # runs_frame's table: every run id (long, full of hyphens) reads on one line, however narrow the cell.
        table = page.locator("table.memkit-runs").first
        table.scroll_into_view_if_needed()
        lines = page.evaluate("""() => Array.from(document.querySelectorAll('table.memkit-runs tbody th')).map(th => {
            const r = document.createRange(); r.selectNodeContents(th);
            return [th.textContent, r.getClientRects().length]; })""")
        assert any(text == "alice/bioinformatics/literature-review-alice/review-alice-1" for text, _ in lines), lines
        assert all(count == 1 for _, count in lines), lines
        table.screenshot(path=str(ROOT / ".artifacts" / "lab-runs-frame.png"))


PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
FAILED_RGB = "rgb(198, 40, 40)"  # STATUS_COLOURS.failed in memkit/widgets/_grid.js

VIEWS_SETUP = f'''\
import memkit
from memkit._demo import demo_items, run_items
from memkit.widgets import Dashboard, NamespaceBrowser, TraceReplay

PAYLOAD = {PAYLOAD!r}
mem = memkit.open("sqlite:///views.db?embedder=none")
mem.add_many(demo_items())
mem.add_many(run_items("zed", "bench", "long-run", "r-10k", 10_000, fail_every=97))
mem.add_many(run_items("zed", "bench", "one-step", "r-1", 1))
mem.add_trace("bench", "no-status", {{"tool": "bwa", "step_index": 0}}, user_id="zed")
mem.add_trace(PAYLOAD, PAYLOAD, {{"tool": PAYLOAD, "step_name": PAYLOAD, "status": "failed", "error": PAYLOAD,
              "run_id": PAYLOAD, "parameters": {{PAYLOAD: PAYLOAD}}, "result": {{"r": PAYLOAD}}, "step_index": 0}},
              user_id=PAYLOAD)
mem.add(PAYLOAD, PAYLOAD, PAYLOAD, {{"note": PAYLOAD}})
# A run whose steps search memory: the first step recalls 3 memories (one deleted later) and writes one.
from memkit.traces import ExecutionHistory
for text in ("TP53 knockdown raises apoptosis in HeLa cells", "TP53 and BRCA1 meet at DNA damage sites",
             "TP53 R175H in the tumour sample", "KRAS G12D in the control"):
    mem.add(text, "rita", "bio", {{"gene": text.split()[0]}})
history = ExecutionHistory(memory_provider=mem, workflow_id="recall-audit", agent_id="bio", user_id="rita",
                           run_id="ra-1")
with history.step("look_up", tool="memory"):
    recalled = mem.search("TP53", "rita", "bio", limit=3, mode="keyword")
    mem.add("plan: TP53 double knockdown", "rita", "bio", {{"workflow_id": "recall-audit", "step_index": 0}})
with history.step("hostile_query", tool="memory"):
    mem.search(PAYLOAD + " TP53", "rita", "bio", limit=5, filters={{"type": {{"$ne": "trace"}}}}, mode="keyword")
history.flush()
mem.delete(recalled[1].id, user_id="rita", agent_id="bio")
print("ready")'''


def _views_notebook() -> nbformat.NotebookNode:
    """The views a researcher opens, one output each: run list, a big run, an empty store, namespaces."""
    cells = [
        VIEWS_SETUP,
        "runs = TraceReplay(mem)\nruns",
        'big = TraceReplay(mem)\nbig',
        'empty = TraceReplay(memkit.open("memory://"))\nempty',
        'dash = Dashboard(mem)\nbrowser = dash.browser\nbrowser.namespace.value = ("alice", "bioinformatics")\n'
        "browser",
        "from memkit.charts import duration_chart, failure_heatmap, success_rate_chart\n\nfailure_heatmap(mem)",
        "duration_chart(mem)",
        'success_rate_chart(mem, freq="h")',
        'audit = TraceReplay(mem)\naudit.filters = {"workflow_id": "recall-audit"}\naudit',
        'rita = NamespaceBrowser(mem)\nrita.namespace.value = ("rita", "bio")\nrita.rows.value = recalled[0].id\n'
        "rita",
        "from memkit.widgets import GraphExplorer\n\ngx = GraphExplorer(mem)\n"
        'gx.scope.value = "workflow"\ngx.workflow.value = ("rita", "bio", "recall-audit")\ngx.draw()\ngx',
        # The docs' charts: the demo sample and the long run, without the hostile fixtures above.
        'clean = memkit.open("memory://")\nclean.add_many(demo_items())\n'
        'clean.add_many(run_items("zed", "bench", "long-run", "r-10k", 10_000, fail_every=97))\n'
        "failure_heatmap(clean)",
        "duration_chart(clean)",
        'docs_panel = TraceReplay(clean)\ndocs_panel.run = "variant-calling-alice-1/run-alice-1"\n'
        "docs_panel.step = 4\ndocs_panel",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _no_news(page: Page) -> None:
    """JupyterLab's toast asking to fetch its news feed stays out of the screenshots."""
    page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")


def _shot(page: Page, target: Locator, name: str) -> None:
    (ROOT / ".artifacts").mkdir(exist_ok=True)
    target.scroll_into_view_if_needed()
    target.screenshot(path=str(ROOT / ".artifacts" / name))


def _rows(panel: Locator) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = panel.locator(".mk-runs tbody tr").evaluate_all(
        "rows => rows.map(r => ({key: r.dataset.key, cls: r.className,"
        " cells: [...r.children].map(td => td.textContent)}))")
    return result


def _check_the_views(url: str) -> None:
    with _lab_page(url, 1500, 1100) as page:
        page.keyboard.press("Escape")
        page.click(".jp-Notebook")
        page.get_by_text("Run", exact=True).first.click()
        page.get_by_text("Run All Cells", exact=True).first.click()
        cells = page.locator(".jp-CodeCell")
        _no_news(page)
        try:
            cells.nth(4).locator(".widget-vbox").first.wait_for(timeout=180_000)
        except Exception:
            (ROOT / ".artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / ".artifacts" / "lab-views-failed.png"))
            raise
        try:
            _check_run_list(page, cells.nth(1).locator(".memkit-traces"))
            _check_big_run(page, cells.nth(2).locator(".memkit-traces"))
            empty = cells.nth(3).locator(".memkit-traces")
            assert "no traces in this store" in empty.inner_text()
            _shot(page, empty, "lab-empty.png")
            _check_namespaces(page, cells.nth(4))
            _check_charts(page, cells)
            _check_recalls(page, cells.nth(8))
            _check_recalled_by(page, cells.nth(9))
            _check_recall_graph(page, cells.nth(10))
            _docs_charts(page, cells)
        except Exception:
            (ROOT / ".artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / ".artifacts" / "lab-views-failed.png"))
            raise
        body = page.locator(".jp-Notebook").inner_text()
        assert "data={" not in body
        assert page.evaluate("() => window.__pwned === undefined")
        assert page.locator(".jp-Notebook img[src='x'], .jp-OutputArea script").count() == 0


def _check_run_list(page: Page, panel: Locator) -> None:
    panel.locator(".mk-runs tbody tr").first.wait_for(timeout=60_000)
    rows = _rows(panel)
    assert len(rows) == 23  # 18 demo runs, the 10,000-step one, the one-step one, no-status, hostile, recalls
    failed = [r for r in rows if r["cls"].startswith("mk-run-failed")]
    assert failed and all(r["cells"][0] == "failed" for r in failed)
    # every column inside the cell, none past its right edge (long names are cut, whole on hover)
    assert panel.locator(".mk-runs .mk-grid-wrap").evaluate("w => w.scrollWidth <= w.clientWidth + 1")
    # Sort by duration: click the header, the longest run comes first.
    panel.locator(".mk-runs th", has_text="duration").click()
    page.wait_for_function("el => el.querySelector('.mk-runs th.mk-sorted')?.textContent.startsWith('duration')",
                           arg=panel.element_handle())
    # The header marks the sort at once; the rows come back sorted from the kernel a moment later.
    try:
        page.wait_for_function("el => el.querySelector('.mk-runs tbody tr')?.dataset.key"
                               " === 'zed/bench/long-run/r-10k'",
                               arg=panel.element_handle(), timeout=30_000)
    finally:
        assert _rows(panel)[0]["key"] == "zed/bench/long-run/r-10k"
    # Filter by status: only failed runs remain, each marked.
    panel.locator("select.mk-filter-status").select_option("failed")
    page.wait_for_function("el => [...el.querySelectorAll('.mk-runs tbody tr')].every("
                           "r => r.classList.contains('mk-run-failed'))", arg=panel.element_handle())
    assert len(_rows(panel)) == len(failed)
    # The status-less run reads unknown.
    panel.locator("select.mk-filter-status").select_option("")
    panel.locator("input.mk-filter-text").fill("no-status")
    panel.locator("input.mk-filter-text").press("Enter")
    page.wait_for_function("el => el.querySelectorAll('.mk-runs tbody tr').length === 1", arg=panel.element_handle())
    assert _rows(panel)[0]["cells"][0] == "unknown"
    panel.locator("input.mk-filter-text").fill("")
    panel.locator("input.mk-filter-text").press("Enter")
    page.wait_for_function("el => el.querySelectorAll('.mk-runs tbody tr').length === 23", arg=panel.element_handle())
    # Hide a column and show it again.
    headers = panel.locator(".mk-runs th").count()
    panel.locator(".mk-runs .mk-columns summary").click()
    panel.locator(".mk-runs .mk-columns label", has_text="agent").locator("input").uncheck()
    page.wait_for_function(f"el => el.querySelectorAll('.mk-runs th').length === {headers - 1}",
                           arg=panel.element_handle())
    assert "agent" not in panel.locator(".mk-runs thead").inner_text().split()
    panel.locator(".mk-runs .mk-columns summary").click()
    panel.locator(".mk-runs .mk-columns label", has_text="agent").locator("input").check()
    page.wait_for_function(f"el => el.querySelectorAll('.mk-runs th').length === {headers}",
                           arg=panel.element_handle())
    # Open a failed demo run: one bar per step, the failed bar in the failure colour.
    panel.locator(".mk-runs th", has_text="started").click()
    # The kernel sends the rows back newest first a moment later: click once they stopped moving,
    # or the click lands on whichever run the redraw put under the pointer.
    page.wait_for_function("""el => { const t = [...el.querySelectorAll('.mk-runs tbody td.mk-col-started')]
      .map((td) => td.textContent); return t.length === 23 && t.every((v, i) => i === 0 || t[i - 1] >= v); }""",
                           arg=panel.element_handle())
    row = panel.locator(".mk-runs tbody tr[data-key='alice/bioinformatics/variant-calling-alice-1/run-alice-1']")
    row.click()
    bars = panel.locator(".mk-timeline .mk-bar")
    bars.first.wait_for(timeout=30_000)
    assert bars.count() == 5
    failed_bar = panel.locator(".mk-timeline .mk-bar[data-status='failed']")
    assert failed_bar.count() == 1
    assert failed_bar.evaluate("b => getComputedStyle(b).backgroundColor") == FAILED_RGB
    assert bars.first.evaluate("b => getComputedStyle(b).backgroundColor") != FAILED_RGB
    # Clicking the failed bar opens that step: its error and its parameters.
    failed_bar.click()
    panel.locator(".mk-detail pre.mk-error").wait_for(timeout=30_000)
    detail = panel.locator(".mk-detail").inner_text()
    assert "ValueError: parameter evalue must be positive" in detail
    assert "gene" in panel.locator(".mk-detail .mk-parameters").inner_text()
    _shot(page, panel, "lab-traces.png")
    # Compare with bob's run of the same workflow: the changed step is marked.
    panel.locator("select.mk-compare-pick").select_option("bob/bioinformatics/variant-calling-bob-1/run-bob-1")
    changed = panel.locator(".mk-compare tr.mk-changed")
    changed.first.wait_for(timeout=30_000)
    texts = changed.all_inner_texts()
    assert any("status" in t for t in texts)
    # the comparison fits the cell: its long "what differs" wraps rather than running past the edge
    assert panel.locator(".mk-compare .mk-grid-wrap").evaluate("w => w.scrollWidth <= w.clientWidth + 1")
    _shot(page, panel.locator(".mk-compare"), "lab-compare.png")
    # Hostile text in every field: shown as text, nothing runs.
    panel.locator("input.mk-filter-text").fill("<img")
    panel.locator("input.mk-filter-text").press("Enter")
    page.wait_for_function("el => el.querySelectorAll('.mk-runs tbody tr').length === 1", arg=panel.element_handle())
    panel.locator(".mk-runs tbody tr").first.click()
    page.wait_for_function("el => el.querySelector('.mk-timeline .mk-title')?.textContent.includes('<img')",
                           arg=panel.element_handle())
    panel.locator(".mk-timeline .mk-bar").first.click()
    page.wait_for_function("el => el.querySelector('.mk-detail pre.mk-error')?.textContent.includes('<img')",
                           arg=panel.element_handle())
    assert PAYLOAD in panel.locator(".mk-detail pre.mk-error").inner_text()
    assert PAYLOAD in panel.locator(".mk-runs").inner_text()
    assert panel.locator("img, script").count() == 0
    _shot(page, panel, "lab-hostile.png")


def _check_big_run(page: Page, panel: Locator) -> None:
    """A 10,000-step run renders; the one-step run too. Prints how long the browser took to draw."""
    panel.locator(".mk-runs tbody tr").first.wait_for(timeout=60_000)
    row = panel.locator(".mk-runs tbody tr[data-key='zed/bench/long-run/r-10k']")
    took = row.evaluate(
        """r => new Promise(done => {
            const panel = r.closest('.memkit-traces');
            const t0 = performance.now();
            r.click();
            const check = () => panel.querySelector('.mk-timeline .mk-tl-rows[data-steps="10000"] .mk-bar')
                ? done(performance.now() - t0) : requestAnimationFrame(check);
            check();
        })""")
    print(f"10,000-step timeline: {took:.0f} ms from click to drawn")
    rows = panel.locator(".mk-timeline .mk-tl-rows")
    assert rows.evaluate("r => r.scrollHeight") == 10_000 * 20  # one 20 px row per step; those in view drawn
    rows.evaluate("r => { r.scrollTop = 96 * 20; }")  # step 96 failed (every 97th does)
    panel.locator(".mk-timeline .mk-bar[data-position='96'][data-status='failed']").wait_for(timeout=10_000)
    _shot(page, panel.locator(".mk-timeline"), "lab-timeline-10k.png")
    panel.locator(".mk-runs tbody tr[data-key='zed/bench/one-step/r-1']").click()
    page.wait_for_function("el => el.querySelectorAll('.mk-timeline .mk-bar').length === 1",
                           arg=panel.element_handle())


def _check_namespaces(page: Page, cell: Locator) -> None:
    grid = cell.locator(".memkit-namespaces")
    grid.locator("tbody tr").first.wait_for(timeout=30_000)
    texts = grid.locator("tbody td.mk-col-text").all_inner_texts()
    assert not any(t.startswith("step ") for t in texts)  # memories first; the steps have their own switch
    cell.locator(".widget-toggle-button", has_text="traces").click()
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.startsWith('traces')",
                           arg=grid.element_handle(), timeout=30_000)
    texts = grid.locator("tbody td.mk-col-text").all_inner_texts()
    assert texts and all(t.startswith("step ") for t in texts)  # trace memories read as steps
    cell.locator(".widget-toggle-button", has_text="memories").click()
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.startsWith('memories')",
                           arg=grid.element_handle(), timeout=30_000)
    assert "data={" not in cell.inner_text() and "namespaces" in cell.inner_text()
    # Sort by a click on the header: oldest first.
    grid.locator("th", has_text="created").click()
    created = grid.locator("tbody td.mk-col-created").all_inner_texts()
    assert created == sorted(created)
    # Enter in the search box searches; each hit has its score bar; a click opens it beside the table.
    box = cell.locator("input[placeholder^='search text']")
    box.fill("BLAST")
    box.press("Enter")
    page.wait_for_function("el => el.textContent.includes('best keyword matches')", arg=grid.element_handle())
    assert grid.locator(".mk-score-bar").count() > 0
    assert "rank" in (grid.locator("td.mk-col-score").first.get_attribute("title") or "")
    grid.locator("tbody tr").first.click()
    cell.locator(".memkit-detail").wait_for(timeout=30_000)
    assert "score" in cell.locator(".memkit-detail").inner_text()
    _shot(page, grid.locator("xpath=.."), "lab-namespaces.png")  # the table and the memory beside it


def _check_charts(page: Page, cells: Locator) -> None:
    """The pictures render offline through JupyterLab's own Vega-Lite renderer."""
    for n, name in ((5, "lab-chart-failures.png"), (6, "lab-chart-durations.png"), (7, "lab-chart-success.png")):
        cells.nth(n).scroll_into_view_if_needed()  # JupyterLab draws only the cells in view
        out = cells.nth(n).locator(".jp-OutputArea-output .vega-embed")
        try:
            out.locator("svg, canvas").first.wait_for(timeout=60_000)
        except Exception:
            page.screenshot(path=str(ROOT / ".artifacts" / "lab-chart-failed.png"))
            raise
        _shot(page, out, name)


def _check_recalls(page: Page, cell: Locator) -> None:
    """The step that searched shows what it recalled, best first; the deleted hit is marked and opens as
    its snapshot; what the step wrote opens the same way; a hostile query stays text."""
    cell.scroll_into_view_if_needed()
    panel = cell.locator(".memkit-traces")
    panel.locator(".mk-runs tbody tr").first.wait_for(timeout=60_000)
    rows = _rows(panel)
    assert [r["key"] for r in rows] == ["rita/bio/recall-audit/ra-1"]
    headers = panel.locator(".mk-runs th").all_inner_texts()
    assert rows[0]["cells"][headers.index("recalls")] == "2"  # the run list counts the run's searches
    panel.locator(".mk-runs tbody tr").first.click()
    panel.locator(".mk-timeline .mk-bar").first.wait_for(timeout=30_000)
    assert panel.locator(".mk-timeline .mk-recall-mark").count() >= 2  # both steps searched (+ the legend key)
    panel.locator(".mk-timeline .mk-bar[data-position='0']").click()
    recalled = panel.locator(".mk-detail .mk-recalled")
    recalled.locator(".mk-hits").wait_for(timeout=30_000)
    assert recalled.locator(".mk-section").inner_text() == "recalled 3 memories"
    assert recalled.locator(".mk-query").inner_text() == "TP53"
    assert "keyword" in recalled.locator(".mk-recall-meta").inner_text()
    hits = recalled.locator("tr.mk-hit")
    assert hits.locator("td.mk-hit-rank").all_inner_texts() == ["1", "2", "3"]
    assert all(t == "keyword" for t in hits.locator("td.mk-hit-legs").all_inner_texts())
    deleted = recalled.locator("tr.mk-hit-deleted")
    assert deleted.count() == 1 and deleted.locator("td.mk-hit-rank").inner_text() == "2"
    assert deleted.locator(".mk-deleted").inner_text() == "deleted"
    snapshot = deleted.locator("td.mk-hit-text").inner_text().removeprefix("deleted").strip()
    assert snapshot.startswith("TP53")
    # A click opens the deleted memory as the step recalled it.
    deleted.click()
    box = panel.locator(".mk-detail .mk-memory.mk-memory-deleted")
    box.wait_for(timeout=30_000)
    assert box.locator("pre.mk-memory-text").inner_text() == snapshot
    assert "deleted from the store since" in box.inner_text()
    # What it wrote: found on request, opened the same way.
    panel.locator(".mk-detail button.mk-find-memories").click()
    wrote = panel.locator(".mk-detail .mk-wrote")
    page.wait_for_function("el => el.querySelector('.mk-wrote .mk-section')?.textContent === 'wrote 1 memory'",
                           arg=panel.element_handle())
    wrote.locator("tr.mk-hit").click()
    page.wait_for_function("el => el.querySelector('.mk-memory pre')?.textContent === 'plan: TP53 double knockdown'",
                           arg=panel.element_handle())
    _shot(page, panel, "lab-recalls.png")
    _shot(page, panel.locator(".mk-detail"), "lab-recalls-detail.png")
    # The hostile query is text, and runs nothing.
    panel.locator(".mk-timeline .mk-bar[data-position='1']").click()
    page.wait_for_function("el => el.querySelector('.mk-recalled .mk-query')?.textContent.startsWith('<img')",
                           arg=panel.element_handle())
    assert panel.locator(".mk-recalled .mk-query").inner_text() == PAYLOAD + " TP53"
    assert panel.locator("img, script").count() == 0
    _shot(page, panel.locator(".mk-detail"), "lab-recalls-hostile.png")


def _check_recalled_by(page: Page, cell: Locator) -> None:
    """A memory's detail lists the steps that recalled it."""
    cell.scroll_into_view_if_needed()
    detail = cell.locator(".memkit-recalled-by")
    detail.wait_for(timeout=30_000)
    text = detail.inner_text()
    assert text.startswith("recalled by 2 steps")
    assert "recall-audit" in text and "0 · look_up" in text and "1 · hostile_query" in text
    assert cell.locator("img, script").count() == 0
    _shot(page, cell.locator(".memkit-detail"), "lab-recalled-by.png")


# Colours of the pixels along an edge of the drawn graph (the first edge of a type).
EDGE_PIXELS = """([root, type]) => {
  const g = root.__memkit; const canvas = root.querySelector('canvas');
  const ctx = canvas.getContext('2d'); const dpr = canvas.width / canvas.clientWidth;
  const edge = g.edges.get({filter: (e) => e.type === type})[0];
  const ends = g.network.getPositions([edge.from, edge.to]);
  const a = g.network.canvasToDOM(ends[edge.from]), b = g.network.canvasToDOM(ends[edge.to]);
  const out = [];
  for (let i = 20; i <= 80; i++) {
    const x = a.x + (b.x - a.x) * i / 100, y = a.y + (b.y - a.y) * i / 100;
    const px = ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data;
    out.push([px[0], px[1], px[2]]);
  }
  return {pixels: out, dashes: edge.dashes, color: edge.color.color};
}"""


def _near(pixel: list[int], colour: str, tolerance: int = 40) -> bool:
    want = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    return all(abs(p - w) <= tolerance for p, w in zip(pixel, want, strict=True))


def _check_recall_graph(page: Page, cell: Locator) -> None:
    """The workflow graph draws what each step recalled as dashed purple edges, apart from the solid
    grey edge to the step's own record; the deleted memory is drawn grey."""
    from memkit.graph._style import DELETED_COLOUR, EDGE_STYLE

    cell.scroll_into_view_if_needed()
    root = cell.locator(".memkit-graph[data-settled='1']")
    root.wait_for(state="attached", timeout=120_000)
    handle = root.element_handle()
    page.wait_for_timeout(500)
    recalled = page.evaluate(EDGE_PIXELS, [handle, "RECALLED"])
    recorded = page.evaluate(EDGE_PIXELS, [handle, "RECORDED_AS"])
    assert recalled["dashes"] and not recorded["dashes"]
    assert recalled["color"] == EDGE_STYLE["RECALLED"]["color"] != recorded["color"]
    on = [p for p in recalled["pixels"] if _near(p, EDGE_STYLE["RECALLED"]["color"])]
    assert on and len(on) < len(recalled["pixels"])  # purple, with gaps: dashed
    assert any(_near(p, EDGE_STYLE["RECORDED_AS"]["color"]) for p in recorded["pixels"])
    assert not any(_near(p, EDGE_STYLE["RECALLED"]["color"]) for p in recorded["pixels"])
    counts = page.evaluate("(r) => r.__memkit.edges.get({filter: (e) => e.type === 'RECALLED'}).length", handle)
    assert counts == 7  # 3 memories for the first step, 4 for the second
    deleted = page.evaluate("(r) => r.__memkit.nodes.get({filter: (n) => n.deleted}).map(n => n.color.background)",
                            handle)
    assert deleted == [DELETED_COLOUR]
    keys = cell.locator(".memkit-graph-edge-key").all_inner_texts()
    assert keys == ["recorded as", "recalled"]
    assert cell.locator("img, script").count() == 0
    _shot(page, cell.locator(".memkit-graph"), "lab-graph-recalls.png")


def _docs_charts(page: Page, cells: Locator) -> None:
    """The charts of the demo sample alone, for the docs."""
    for n, name in ((11, "lab-docs-failures.png"), (12, "lab-docs-durations.png")):
        cells.nth(n).scroll_into_view_if_needed()
        out = cells.nth(n).locator(".jp-OutputArea-output .vega-embed")
        out.locator("svg, canvas").first.wait_for(timeout=60_000)
        assert "<img" not in out.inner_text()
        _shot(page, out, name)
    panel = cells.nth(13).locator(".memkit-traces")
    panel.scroll_into_view_if_needed()
    panel.locator(".mk-detail pre.mk-error").wait_for(timeout=60_000)
    assert "<img" not in panel.inner_text()
    _shot(page, panel, "lab-docs-traces.png")


# 300 runs written the way a researcher's own agent writes them: each run spells its timing its
# own way (or not at all), some steps carry no status, a few runs fail.
TIMING_SETUP = """\
import random
from datetime import UTC, datetime, timedelta

import memkit
from memkit.widgets import TraceReplay

mem = memkit.open("sqlite:///timing.db?embedder=none")
rng = random.Random(3)
styles = ["duration_ms", "latency_ms", "duration_s", "elapsed", "started_at/ended_at", "none"]
start = datetime(2026, 10, 1, tzinfo=UTC)
for r in range(300):
    clock = start + timedelta(hours=r)
    style = styles[r % len(styles)]
    for i in range(10):
        seconds = [0.5, 4.0, 1.0, 12.0, 2.0, 0.3, 8.0, 1.5, 3.0, 6.0][(i + r) % 10] * rng.uniform(0.9, 1.1)
        step = {"step_name": f"step_{i}", "tool": ["fetch", "align", "llm"][i % 3], "step_index": i,
                "run_id": f"run-{r}"}
        if i != 2:  # this agent never writes a status for its third step
            step["status"] = "failed" if (r % 10 == 0 and i == 3) else "success"
        if step.get("status") == "failed":
            step["error"] = "RuntimeError: the aligner ran out of memory on chromosome 7 " * 4
        if style in ("duration_ms", "latency_ms"):
            step[style] = seconds * 1000
            step["started_at"] = clock.isoformat()
        elif style == "duration_s":
            step.update(duration_s=seconds, start_time=clock.timestamp())
        elif style == "elapsed":
            step.update(elapsed=seconds, started_at=clock)
        elif style == "started_at/ended_at":
            step.update(started_at=clock.isoformat(), ended_at=(clock + timedelta(seconds=seconds)).isoformat())
        mem.add_trace("aligner", "align-genome", step, user_id="lab")
        clock += timedelta(seconds=seconds + 0.5)
        if step.get("status") == "failed":
            break
print("ready")"""


def _timing_notebook() -> nbformat.NotebookNode:
    cells = [TIMING_SETUP, "panel = TraceReplay(mem)\npanel"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _open_run(page: Page, panel: Locator, run: str) -> Locator:
    box = panel.locator("input.mk-filter-text")
    box.fill(run)
    box.press("Enter")
    # the filtered list replaces the whole one: click the run once only matching rows are drawn
    page.wait_for_function("""([el, run]) => { const rows = [...el.querySelectorAll('.mk-runs tbody tr')];
      return rows.length > 0 && rows.every((r) => r.dataset.key.includes(run)); }""",
                           arg=[panel.element_handle(), run])
    row = panel.locator(f".mk-runs tbody tr[data-key='{run}']")
    row.wait_for(timeout=30_000)
    row.click()
    page.wait_for_function("([el, run]) => el.querySelector('.mk-timeline .mk-title')?.textContent.includes(run)",
                           arg=[panel.element_handle(), run])
    return panel.locator(".mk-timeline .mk-bar")


def _bar_widths(bars: Locator) -> list[float]:
    widths: list[float] = bars.evaluate_all("bs => bs.map(b => b.getBoundingClientRect().width)")
    return widths


def _check_timing(url: str) -> None:
    """A researcher's store: bars as wide as the steps took whatever the key, the failed step red,
    and a run that recorded no timing says so instead of drawing slivers."""
    with _lab_page(url, 1500, 1100) as page:
        page.keyboard.press("Escape")
        page.click(".jp-Notebook")
        page.get_by_text("Run", exact=True).first.click()
        page.get_by_text("Run All Cells", exact=True).first.click()
        panel = page.locator(".jp-CodeCell").nth(1).locator(".memkit-traces")
        try:
            panel.locator(".mk-runs tbody tr").first.wait_for(timeout=240_000)
        except Exception:
            (ROOT / ".artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / ".artifacts" / "lab-timing-failed.png"))
            raise
        assert "300 of 300 runs" in panel.locator(".mk-runs .mk-caption").inner_text()
        # run-0 wrote duration_ms and failed at step 3: four bars, the failed one red, widths that differ.
        for run, steps in (("lab/aligner/align-genome/run-0", 4), ("lab/aligner/align-genome/run-4", 10),
                           ("lab/aligner/align-genome/run-3", 10)):
            bars = _open_run(page, panel, run)
            bars.first.wait_for(timeout=30_000)
            assert bars.count() == steps, run
            widths = _bar_widths(bars)
            assert max(widths) > 5 * min(widths), (run, widths)  # as wide as the step took, not slivers
            assert panel.locator(".mk-timeline .mk-timing-note").count() == 0, run
        bars = _open_run(page, panel, "lab/aligner/align-genome/run-0")
        failed = panel.locator(".mk-timeline .mk-bar[data-status='failed']")
        assert failed.count() == 1 and failed.get_attribute("data-position") == "3"
        assert failed.evaluate("b => getComputedStyle(b).backgroundColor") == FAILED_RGB
        assert bars.first.evaluate("b => getComputedStyle(b).backgroundColor") != FAILED_RGB
        # The step without a status reads unknown, not success.
        assert panel.locator(".mk-timeline .mk-bar[data-position='2']").get_attribute("data-status") == "unknown"
        _shot(page, panel, "lab-timing.png")
        # run-5 recorded no timing: the panel says so in words, and bars follow step order.
        bars = _open_run(page, panel, "lab/aligner/align-genome/run-5")
        note = panel.locator(".mk-timeline .mk-timing-note")
        note.wait_for(timeout=30_000)
        assert note.inner_text().startswith("No step timing recorded in this run")
        widths = _bar_widths(bars)
        assert len(widths) == 10 and max(widths) - min(widths) < 1.5
        assert "step 1" in panel.locator(".mk-timeline .mk-axis").inner_text()
        _shot(page, panel.locator(".mk-timeline"), "lab-timing-none.png")
        # The full first error is one hover away: the cell's title holds all of it.
        box = panel.locator("input.mk-filter-text")
        box.fill("run-10")
        box.press("Enter")
        page.wait_for_function(
            "el => el.querySelector(\".mk-runs tbody tr[data-key='lab/aligner/align-genome/run-10']\")",
            arg=panel.element_handle())
        cell = panel.locator(".mk-runs tbody tr[data-key='lab/aligner/align-genome/run-10'] td.mk-col-first_error")
        full = cell.get_attribute("title") or ""
        assert full.count("chromosome 7") == 4 and len(cell.inner_text()) < len(full)
