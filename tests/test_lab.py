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
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nbformat
import pytest
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
    port = _free_port()
    log = (tmp_path / "lab.log").open("w+")
    # No desktop browser (the test drives its own); JupyterLab's workspace files stay in tmp_path.
    env = {**os.environ, "BROWSER": "true", "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    db = tmp_path / "memory.db"
    proc = subprocess.Popen(["make", "-C", str(ROOT), "lab-serve", f"LAB_PORT={port}", f"LAB_DIR={tmp_path}",
                             f"LAB_DB={db}"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        url = None
        deadline = time.monotonic() + 180
        while url is None and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=\w+", (tmp_path / "lab.log").read_text())
            url = found.group(0) if found else None
            time.sleep(0.5)
        assert url, (tmp_path / "lab.log").read_text()
        assert db.stat().st_size > 0  # make lab loaded the demo store
        token = url.split("token=")[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks/00_tour.ipynb?token={token}") as r:
            assert r.status == 200
        _only_loopback(port)
        # ?reset: start from an empty workspace, whatever an earlier session left open
        _run_the_tour(url.replace("/lab?", "/lab/tree/notebooks/00_tour.ipynb?reset&"))
        _check_the_views(url.replace("/lab?", "/lab/tree/notebooks/views.ipynb?reset&"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()


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
        assert "9 namespaces, 335 memories" in text and "best hybrid matches" in text
        assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
        (ROOT / ".artifacts").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / ".artifacts" / "lab.png"))


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
        _check_run_list(page, cells.nth(1).locator(".memkit-traces"))
        _check_big_run(page, cells.nth(2).locator(".memkit-traces"))
        empty = cells.nth(3).locator(".memkit-traces")
        assert "no traces in this store" in empty.inner_text()
        _shot(page, empty, "lab-empty.png")
        _check_namespaces(page, cells.nth(4))
        _check_charts(page, cells)
        body = page.locator(".jp-Notebook").inner_text()
        assert "data={" not in body
        assert page.evaluate("() => window.__pwned === undefined")
        assert page.locator(".jp-Notebook img[src='x'], .jp-OutputArea script").count() == 0


def _check_run_list(page: Page, panel: Locator) -> None:
    panel.locator(".mk-runs tbody tr").first.wait_for(timeout=60_000)
    rows = _rows(panel)
    assert len(rows) == 22  # 18 demo runs, the 10,000-step one, the one-step one, no-status, hostile
    failed = [r for r in rows if r["cls"].startswith("mk-run-failed")]
    assert failed and all(r["cells"][0] == "failed" for r in failed)
    # Sort by duration: click the header, the longest run comes first.
    panel.locator(".mk-runs th", has_text="duration").click()
    page.wait_for_function("el => el.querySelector('.mk-runs th.mk-sorted')?.textContent.startsWith('duration')",
                           arg=panel.element_handle())
    assert _rows(panel)[0]["key"] == "long-run/r-10k"
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
    page.wait_for_function("el => el.querySelectorAll('.mk-runs tbody tr').length === 22", arg=panel.element_handle())
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
    row = panel.locator(".mk-runs tbody tr[data-key='variant-calling-alice-1/run-alice-1']")
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
    panel.locator("select.mk-compare-pick").select_option("variant-calling-bob-1/run-bob-1")
    changed = panel.locator(".mk-compare tr.mk-changed")
    changed.first.wait_for(timeout=30_000)
    texts = changed.all_inner_texts()
    assert any("status" in t for t in texts)
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
    row = panel.locator(".mk-runs tbody tr[data-key='long-run/r-10k']")
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
    panel.locator(".mk-runs tbody tr[data-key='one-step/r-1']").click()
    page.wait_for_function("el => el.querySelectorAll('.mk-timeline .mk-bar').length === 1",
                           arg=panel.element_handle())


def _check_namespaces(page: Page, cell: Locator) -> None:
    grid = cell.locator(".memkit-namespaces")
    grid.locator("tbody tr").first.wait_for(timeout=30_000)
    texts = grid.locator("tbody td.mk-col-text").all_inner_texts()
    assert any(t.startswith("step ") for t in texts)  # trace memories read as steps
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
