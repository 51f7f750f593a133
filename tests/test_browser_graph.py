"""The graph as a researcher sees it: real JupyterLab, real Chromium, a SQLite file and a FalkorDB server.

A notebook builds a store (memories with genes and topics, two runs of a workflow, one
failed step, one memory of hostile HTML) and shows GraphExplorer three ways: a namespace
(drawn from the newest memory only, so that expanding has something to fetch), a
workflow, and the Dashboard with its Graph tab hidden when drawn. Playwright then reads
the rendered canvas, double-clicks, searches, toggles the legend, hovers and clicks.
Every request must stay on loopback. Screenshots: .artifacts/lab-graph-*.png.
The standalone page (``MemoryGraph.to_html``) gets the same checks without a kernel.
"""

from __future__ import annotations

import csv
import os
import re
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from _lab_server import LabServer
from graph_scale import fill_scale
from playwright.sync_api import Browser, FloatRect, Locator, Page, expect
from test_browser import ARTIFACTS, PAYLOAD, _guarded_page, _pwned, browser, site  # noqa: F401

import memkit
from memkit.graph import memory_graph
from memkit.graph._style import FAILED_COLOUR, LABEL_STYLE
from memkit.testing import FalkorDBServer

CHROMIUM = "/usr/bin/chromium"
_NO_CHROMIUM = not Path(CHROMIUM).exists() and not os.environ.get("CI")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_NO_CHROMIUM, reason="needs the Debian package chromium (make install-test)"),
]

FILL = '''
def fill(mem):
    mem.add(PAYLOAD, "alice", "bio", {"gene": "EGFR", "topic": PAYLOAD})
    mem.add("BRCA1 and TP53 interact at DNA damage sites", "alice", "bio",
            {"gene": ["BRCA1", "TP53"], "topic": "DNA repair"})
    steps = [("fetch_reads", "sra-tools"), ("quality_check", "fastqc"), ("align_reads", "bwa"),
             ("call_variants", "gatk")]
    for run, failed_at in (("run-1", None), ("run-2", 2)):
        for index in (3, 0, 2, 1):
            name, tool = steps[index]
            status = "failed" if index == failed_at else "success"
            mem.add_trace("bio", "variant-calling", {
                "step_index": index, "step_name": name, "tool": tool, "status": status, "run_id": run,
                "duration": 2.5, "error": "Connection reset by peer" if status == "failed" else None,
            }, user_id="alice")
    mem.add("TP53 knockdown raises apoptosis in HeLa cells", "alice", "bio",
            {"gene": "TP53", "topic": "apoptosis", "disease": PAYLOAD})
'''

# JavaScript run in the page: find a drawn graph by its title, read what the canvas shows.
PICK = "(title) => Array.from(document.querySelectorAll('.memkit-graph')).find(r => " \
       "r.querySelector('.memkit-graph-title').textContent.startsWith(title))"
PIXELS = f"""(title) => {{
  const r = ({PICK})(title); const g = r.__memkit; const canvas = r.querySelector('canvas');
  const ctx = canvas.getContext('2d'); const dpr = canvas.width / canvas.clientWidth; const out = {{}};
  for (const n of g.nodes.get({{filter: (n) => !n.hidden}})) {{
    const key = n.failed ? 'failed' : n.type;
    if (out[key]) continue;
    const p = g.network.canvasToDOM(g.network.getPositions([n.id])[n.id]);
    const px = ctx.getImageData(Math.round(p.x * dpr), Math.round(p.y * dpr), 1, 1).data;
    out[key] = '#' + [px[0], px[1], px[2]].map((v) => v.toString(16).padStart(2, '0')).join('').toUpperCase();
  }}
  return out;
}}"""
WHERE = f"""([title, label]) => {{
  const r = ({PICK})(title); const g = r.__memkit;
  const n = g.nodes.get({{filter: (n) => n.caption === label}})[0];
  const p = g.network.canvasToDOM(g.network.getPositions([n.id])[n.id]);
  const box = r.querySelector('canvas').getBoundingClientRect();
  const inside = p.x > 0 && p.y > 0 && p.x < box.width && p.y < box.height;
  return {{id: n.id, x: box.x + p.x, y: box.y + p.y, inside}};
}}"""
# What a person could misread: two drawn nodes on top of each other (a click opens the wrong one), a
# caption over a node or cut at the canvas edge. Read from the network's positions and the captions drawn.
LAYOUT = """([title, nth]) => {
  const r = Array.from(document.querySelectorAll('.memkit-graph')).filter(
    (r) => r.querySelector('.memkit-graph-title').textContent.startsWith(title))[nth || 0];
  const g = r.__memkit; const body = g.network.body.nodes;
  const box = r.querySelector('canvas').getBoundingClientRect(); const s = g.network.getScale();
  const shown = g.network.body.nodeIndices.map((id) => body[id]).filter((n) => !n.options.hidden);
  const rad = (n) => (n.options.size || 10) + (n.options.borderWidth || 1);
  const overlaps = [];
  for (let i = 0; i < shown.length; i++) for (let j = i + 1; j < shown.length; j++) {
    const a = shown[i], b = shown[j];
    if (Math.hypot(a.x - b.x, a.y - b.y) < rad(a) + rad(b)) overlaps.push([a.options.caption, b.options.caption]);
  }
  const screen = shown.map((n) => { const p = g.network.canvasToDOM({x: n.x, y: n.y});
    return {id: n.id, x: p.x, y: p.y, r: rad(n) * s}; });
  const covered = [], outside = [];
  for (const c of g.captions()) {
    const [x0, y0, x1, y1] = c.box;
    if (x0 < 0 || y0 < 0 || x1 > box.width || y1 > box.height) outside.push(c.text);
    for (const n of screen) {
      if (n.id !== c.id && n.x + n.r > x0 && n.x - n.r < x1 && n.y + n.r > y0 && n.y - n.r < y1) {
        covered.push([c.text, body[n.id].options.caption]);
      }
    }
  }
  return {overlaps, covered, outside, captions: g.captions().length, nodes: shown.length};
}"""
COUNT = f"""([title, type]) => ({PICK})(title).__memkit.nodes.get(
  {{filter: (n) => !n.hidden && (type === null || n.type === type)}}).length"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _notebook(root: Path, url: str) -> None:
    code = [
        f"import memkit\nfrom memkit.graph import memory_graph\nfrom memkit.widgets import Dashboard, GraphExplorer\n"
        f"PAYLOAD = {PAYLOAD!r}\n{FILL}\nmem = memkit.open({url!r})\nmem.reset()\nfill(mem)\nprint('filled')",
        # Drawn from the newest memory only: TP53's other memories are in the store, not yet on screen.
        "explorer = GraphExplorer(mem, graph=lambda m, u, a, w: memory_graph(m, u, a, w, limit=1))\n"
        "explorer.namespace.value = ('alice', 'bio')\nexplorer.draw()\nexplorer",
        "flow = GraphExplorer(mem)\nflow.scope.value = 'workflow'\n"
        "flow.workflow.value = ('alice', 'bio', 'variant-calling')\nflow.draw()\nflow",
        "dash = Dashboard(mem)\ndash.explorer.namespace.value = ('alice', 'bio')\ndash.explorer.draw()\ndash",
        "print('selected:', explorer.selected.type, explorer.selected.properties.get('name'))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in code])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "graph.ipynb")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """JupyterLab on 127.0.0.1 with its root in a temporary folder; stopped after the test."""
    port, token = _free_port(), uuid.uuid4().hex
    root = tmp_path / "root"
    root.mkdir()

    def ready(_log: str) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                return f"http://127.0.0.1:{port}/lab/tree/graph.ipynb?token={token}"
        except OSError:
            return None

    with LabServer([sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                    f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--allow-root"],
                   tmp_path / "lab.log", ready, env={**os.environ, "BROWSER": "true"}, timeout=120) as server:
        yield server.url, root


@pytest.fixture(params=["sqlite", "falkordb"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'lab.db'}"
    server: FalkorDBServer = request.getfixturevalue("falkordb_server")
    return server.url(f"lab-{uuid.uuid4().hex[:8]}")


def _run_all(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".jp-Notebook", timeout=90_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
    page.keyboard.press("Escape")
    page.click(".jp-Notebook")
    page.get_by_text("Run", exact=True).first.click()
    page.get_by_text("Run All Cells", exact=True).first.click()


def _settled(page: Page, title: str) -> None:
    page.wait_for_function(f"(t) => {{ const r = ({PICK})(t); return r && r.dataset.settled === '1'; }}",
                           arg=title, timeout=60_000)


# True once an element's box has read the same for four polls in a row: a notebook that scrolls the
# active cell into view (smoothly, and late on a loaded machine) has stopped moving it.
STILL = """(el) => { const r = el.getBoundingClientRect(); const key = [r.x, r.y, r.width, r.height].join();
  const n = el.__mkStill && el.__mkStill.key === key ? el.__mkStill.n + 1 : 0;
  el.__mkStill = {key, n}; return n >= 3; }"""


def _still(page: Page, element: Locator) -> None:
    """Wait until ``element`` stops moving on the page (positions read after this are where a click lands)."""
    page.wait_for_function(STILL, arg=element.element_handle(), polling=100, timeout=60_000)


def _show(page: Page, title: str) -> None:
    page.evaluate(f"(t) => ({PICK})(t).scrollIntoView({{block: 'start'}})", title)
    _still(page, page.locator(".memkit-graph").filter(
        has=page.locator(".memkit-graph-title", has_text=title)).first.locator("canvas"))


def test_graph_in_jupyterlab(browser: Browser, lab: tuple[str, Path], store_url: str) -> None:  # noqa: F811
    url, root = lab
    _notebook(root, store_url)
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.set_viewport_size({"width": 1400, "height": 1000})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url)
    try:
        _explore(page)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-graph-failed.png"), full_page=True)
        raise
    assert _pwned(page) == [None] * len(page.frames)
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert outside == []


def _explore(page: Page) -> None:
    ns, wf = "namespace alice / bio", "workflow variant-calling"
    _settled(page, ns)
    _settled(page, wf)

    # Colours on the canvas differ by type and are the schema's.
    _show(page, wf)
    flow = page.evaluate(PIXELS, wf)
    assert flow["failed"] == FAILED_COLOUR
    assert flow["Step"] == LABEL_STYLE["Step"]["color"] and flow["Tool"] == LABEL_STYLE["Tool"]["color"]
    assert len(set(flow.values())) == len(flow) >= 6
    _readable(page, wf)
    drawn = {c["text"] for c in page.evaluate(CAPTIONS, wf)}
    assert "variant-calling" in drawn and "alice / bio" in drawn, drawn  # the workflow square names itself
    flow_nodes = page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.get()", wf)
    step_memories = sorted(n["caption"] for n in flow_nodes if n["type"] == "Memory")
    assert step_memories[:2] == ["step 0 · fetch_reads"] * 2, step_memories  # whole, not "step 0 · sra-tools · fetch_…"
    page.locator(".memkit-graph").nth(1).screenshot(path=str(ARTIFACTS / "lab-graph-workflow.png"))

    # Double-click an entity: its neighbours come from the store.
    _show(page, ns)
    labels = page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.get().map((n) => n.caption)", ns)
    assert "TP53" in labels, labels
    before = page.evaluate(COUNT, [ns, "Memory"])
    # The first click into an output makes its cell the active one, which may scroll the notebook.
    canvas = page.locator(".memkit-graph-canvas").first.bounding_box()
    assert canvas is not None
    page.mouse.click(canvas["x"] + 5, canvas["y"] + 5)
    _still(page, page.locator(".memkit-graph-canvas").first)
    tp53 = page.evaluate(WHERE, [ns, "TP53"])
    page.mouse.dblclick(tp53["x"], tp53["y"])
    page.wait_for_function(f"(t) => Number(({PICK})(t).dataset.expanded) > 0", arg=ns, timeout=30_000)
    assert page.evaluate(COUNT, [ns, "Memory"]) == before + 1  # BRCA1's memory; never another namespace's
    assert "new node" in page.locator(".memkit-graph-message").first.inner_text()
    # The double-click selected TP53, which fades what is not next to it; a click on the background clears it.
    spotlight = f"([t, want]) => ({PICK})(t).dataset.spotlight === want"
    page.wait_for_function(spotlight, arg=[ns, tp53["id"]])
    _still(page, page.locator(".memkit-graph-canvas").first)
    now = page.locator(".memkit-graph-canvas").first.bounding_box()
    assert now is not None
    page.mouse.click(now["x"] + 5, now["y"] + 5)
    page.wait_for_function(spotlight, arg=[ns, ""])
    # the veil lifts on the next frame drawn: read the canvas once every type shows its own colour again
    want = {kind: LABEL_STYLE[kind]["color"] for kind in ("Namespace", "Memory", "Entity")}
    page.wait_for_function(f"([t, want]) => {{ const c = ({PIXELS})(t);"
                           " return Object.entries(want).every(([k, v]) => c[k] === v); }", arg=[ns, want])
    colours = page.evaluate(PIXELS, ns)
    for kind in ("Namespace", "Memory", "Entity"):
        assert colours[kind] == LABEL_STYLE[kind]["color"], colours

    # Search finds a node by caption and focuses it (centre of the view, selected, properties shown).
    search = page.locator(".memkit-graph-search").first
    search.fill("brca1")
    search.press("Enter")
    focused = page.evaluate(f"(t) => {{ const r = ({PICK})(t); return r.__memkit.nodes.get(r.dataset.focused); }}", ns)
    assert focused["caption"].startswith("BRCA1 and TP53") and focused["type"] == "Memory"  # the expanded memory
    assert page.evaluate(WHERE, [ns, focused["caption"]])["inside"]
    assert focused["caption"] in page.locator(".memkit-graph-props-title").first.inner_text()

    # Click: the properties panel, and the selection in Python.
    entity = page.evaluate(WHERE, [ns, "TP53"])
    page.mouse.click(entity["x"], entity["y"])
    panel = page.locator(".memkit-graph-props").first
    assert entity["id"] in panel.inner_text() and "kind" in panel.inner_text()
    last = page.locator(".jp-Cell").filter(has_text="print('selected:'")
    last.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    page.get_by_text("selected: Entity TP53").wait_for(timeout=30_000)

    # Hostile text: the caption is drawn, the tooltip and the panel show it as text.
    evil = page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.get({{filter: (n) => n.caption.startsWith('<img')}})[0]",
                         ns)
    assert evil is not None
    _show(page, ns)
    assert not page.evaluate(WHERE, [ns, evil["caption"]])["inside"]  # the search zoomed in on BRCA1
    page.locator(".memkit-graph-fit").first.click()
    spot = page.evaluate(WHERE, [ns, evil["caption"]])
    assert spot["inside"]
    page.mouse.move(spot["x"], spot["y"])
    tip = page.locator(".vis-tooltip", has_text="<img src=x onerror=")
    tip.wait_for(state="visible", timeout=30_000)
    assert tip.inner_text().startswith("disease: <img src=x onerror=")
    page.mouse.click(spot["x"], spot["y"])
    assert "<img src=x onerror=" in panel.inner_text()
    assert page.evaluate(f"(t) => ({PICK})(t).querySelectorAll('img, script, a').length", ns) == 0
    page.locator(".memkit-graph").first.screenshot(path=str(ARTIFACTS / "lab-graph-namespace.png"))

    # The legend hides a type.
    page.locator(".memkit-graph").first.locator(".memkit-graph-chip[data-type='Memory']").click()
    assert page.evaluate(COUNT, [ns, "Memory"]) == 0 and page.evaluate(COUNT, [ns, "Entity"]) > 0
    assert page.locator(".memkit-graph").first.locator(".memkit-graph-chip.memkit-graph-off").count() == 1

    # The Dashboard drew its graph while the tab was hidden: it opens fitted.
    dash_title = "namespace alice / bio"
    page.locator(".widget-tab .lm-TabBar-tab").filter(has_text=re.compile(r"^\s*Graph\s*$")).first.click()
    fit = """(t) => {
      const r = Array.from(document.querySelectorAll('.memkit-graph')).filter(
        (r) => r.querySelector('.memkit-graph-title').textContent.startsWith(t))[1];
      const g = r.__memkit; const box = r.querySelector('canvas').getBoundingClientRect();
      const ps = Object.values(g.network.getPositions()).map((p) => g.network.canvasToDOM(p));
      return {w: box.width, inside: ps.every((p) => p.x >= 0 && p.y >= 0 && p.x <= box.width && p.y <= box.height),
              n: ps.length, scale: g.network.getScale()};
    }"""
    # The tab shows, then the graph fits itself to it: wait for the fit rather than for a fixed time.
    page.wait_for_function(f"(t) => {{ const f = ({fit})(t); return f.w > 300 && f.inside; }}", arg=dash_title)
    fitted = page.evaluate(fit, dash_title)
    assert fitted["w"] > 300 and fitted["n"] > 20 and fitted["inside"] and fitted["scale"] > 0.2, fitted
    _readable(page, dash_title, 1)  # every caption drawn whole inside the canvas, none cut at its edge
    page.locator(".widget-tab").first.screenshot(path=str(ARTIFACTS / "lab-graph-dashboard.png"))


def _readable(page: Page, title: str, nth: int = 0) -> None:
    """No two drawn nodes overlap; each caption is whole inside the canvas and over no node; a caption
    cut short ends after a whole word and its node's tooltip holds the whole text."""
    layout = page.evaluate(LAYOUT, [title, nth])
    assert layout["captions"] > 0 and layout["overlaps"] == [], layout
    assert layout["covered"] == [] and layout["outside"] == [], layout
    nodes = page.evaluate("""([t, nth]) => Array.from(document.querySelectorAll('.memkit-graph')).filter(
      (r) => r.querySelector('.memkit-graph-title').textContent.startsWith(t))[nth].__memkit.nodes.get()""",
                          [title, nth])
    for n in nodes:
        if not n["caption"].endswith("…"):
            continue
        head, tip = n["caption"][:-1], " ".join(str(n["title"]).split())
        assert head in tip, (n["caption"], tip)
        after = tip[tip.index(head) + len(head):][:1]
        assert not after.isalnum() and after != "_", (n["caption"], tip)  # never cut inside a word


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour, to measure how different two colours look."""
    rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _distinct_colours(page: Page, title: str) -> None:
    """Every two legend entries differ by at least 20 (CIE76 delta E; 2.3 is the smallest a person notices)."""
    chips = page.evaluate(f"""(t) => Array.from(({PICK})(t).querySelectorAll('.memkit-graph-chip')).map((c) => [
      c.dataset.type, getComputedStyle(c.querySelector('.memkit-graph-dot')).backgroundColor])""", title)
    colours = {}
    for kind, css in chips:
        r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
        colours[kind] = _lab(f"#{r:02x}{g:02x}{b:02x}")
    assert len(colours) >= 5, chips
    for a in colours:
        for b in colours:
            if a < b:
                distance = sum((p - q) ** 2 for p, q in zip(colours[a], colours[b], strict=True)) ** 0.5
                assert distance >= 20, (a, b, distance)


def test_standalone_page_without_a_kernel(browser: Browser, site: tuple[str, Path]) -> None:  # noqa: F811
    base, root = site
    mem = memkit.open("memory://")
    mem.add(PAYLOAD, "alice", "bio", {"gene": "TP53", "topic": PAYLOAD})
    for gene in ("TP53", "BRCA1", "EGFR"):
        mem.add(f"BLAST of {gene} returned hits", "alice", "bio", {"gene": gene, "topic": "homology"})
    mem.add_trace("bio", "wf", {"step_index": 0, "tool": "blast", "status": "failed"}, user_id="alice")
    memory_graph(mem).to_html(str(root / "graph.html"), title="namespace alice / bio")
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.goto(f"{base}/graph.html")
    _settled(page, "namespace alice / bio")
    colours = page.evaluate(PIXELS, "namespace alice / bio")
    assert colours["failed"] == FAILED_COLOUR and colours["Entity"] == LABEL_STYLE["Entity"]["color"]
    assert len(set(colours.values())) == len(colours) >= 6
    text = page.inner_text("body")
    assert "showing all" in text and "Memory (5)" in text
    spot = page.evaluate(WHERE, ["namespace", "TP53"])
    page.mouse.dblclick(spot["x"], spot["y"])
    assert "needs the live widget" in page.inner_text(".memkit-graph-message")
    page.fill(".memkit-graph-search", "egfr")
    page.press(".memkit-graph-search", "Enter")
    assert "EGFR" in page.inner_text(".memkit-graph-props")
    page.click(".memkit-graph-chip[data-type='Entity']")
    assert page.evaluate(COUNT, ["namespace", "Entity"]) == 0
    page.click(".memkit-graph-reset")
    assert page.evaluate(COUNT, ["namespace", "Entity"]) == 5  # genes, topics, a disease; a step's tool is a Tool node
    assert page.evaluate("() => document.querySelectorAll('img, a').length") == 0
    page.screenshot(path=str(ARTIFACTS / "graph.png"))
    assert _pwned(page) == [None] and outside == []


def _scale_notebook(root: Path, url: str, namespaces: bool = False) -> None:
    source = (Path(__file__).parent / "graph_scale.py").read_text(encoding="utf-8")
    fill = (f"{source}\nimport memkit\nfrom memkit.widgets import GraphExplorer\nmem = memkit.open({url!r})\n"
            "mem.reset()\nfill_scale(mem)\nprint('filled')")
    if namespaces:
        code = [fill, "from memkit.widgets import NamespaceBrowser\n"
                      "nb = NamespaceBrowser(mem)\nnb.namespace.value = ('ana', 'bio')\nnb"]
    else:
        code = [fill, "gx = GraphExplorer(mem, size_by='count')\ngx.namespace.value = ('ana', 'bio')\ngx.draw()\ngx",
                "print('drawn:', len(gx.view.nodes), 'nodes; memories in store:', gx.view.total['Memory'])"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in code])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "graph.ipynb")


CAPTIONS = f"(t) => ({PICK})(t).__memkit.captions()"
LEGEND = f"""(t) => Object.fromEntries(Array.from(({PICK})(t).querySelectorAll('.memkit-graph-chip')).map(
  (c) => [c.dataset.type, c.textContent]))"""


def test_a_5000_memory_store_reads_as_groups(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    """What a researcher sees first on 5,000 memories: named groups, readable captions, one click to open."""
    url, root = lab
    _scale_notebook(root, f"sqlite:///{root / 'scale.db'}?embedder=none")
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.set_viewport_size({"width": 1400, "height": 1000})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url)
    title = "namespace ana / bio"
    try:
        _settled(page, title)
        _at_scale(page, title)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-graph-scale-failed.png"), full_page=True)
        raise
    assert outside == []
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0


def test_the_namespace_browser_on_a_5000_memory_store(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    """The NamespaceBrowser on the graph's 5,000-memory store, in its own notebook so either view's
    failure leaves the other's checks standing."""
    url, root = lab
    _scale_notebook(root, f"sqlite:///{root / 'scale.db'}?embedder=none", namespaces=True)
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    # tall enough that a screenshot of the cell holds the whole table
    page.set_viewport_size({"width": 1400, "height": 1500})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url)
    try:
        _browser_at_scale(page, root)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-namespaces-failed.png"), full_page=True)
        raise
    assert outside == []
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0


def _at_scale(page: Page, title: str) -> None:
    _show(page, title)
    graph = page.locator(".memkit-graph").first
    # At first: a few hundred items at most, every one a named thing (no memory dots), with a count.
    drawn = page.evaluate(COUNT, [title, None])
    assert 50 <= drawn <= 300, drawn
    assert page.evaluate(COUNT, [title, "Memory"]) == 0
    nodes = page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.get()", title)
    assert all(n["caption"] and not re.fullmatch(r"[0-9a-f-]{{36}}", n["caption"]) for n in nodes)
    tp53 = next(n for n in nodes if n["caption"].startswith("TP53 ("))
    assert tp53["group"] and tp53["count"] > 500
    # Captions at the default fit: at least 11 px on screen, the biggest groups named, none overlapping.
    captions = page.evaluate(CAPTIONS, title)
    assert len(captions) >= 20 and all(c["px"] >= 11 for c in captions), captions[:3]
    assert tp53["id"] in {c["id"] for c in captions}
    _readable(page, title)
    _distinct_colours(page, title)
    # Styled by rule (size by the memories in a group, as the notebook asked): TP53 outgrows a rare gene.
    assert page.evaluate(f"(t) => ({PICK})(t).dataset.sizeBy", title) == "count"
    rare = min((n for n in nodes if n["type"] == "Entity"), key=lambda n: n["count"])
    sizes = page.evaluate(f"([t, a, b]) => ({PICK})(t).__memkit.nodes.get([a, b]).map((n) => n.size)",
                          [title, tp53["id"], rare["id"]])
    assert sizes[0] > 2 * sizes[1], sizes
    graph.screenshot(path=str(ARTIFACTS / "lab-graph-scale.png"))
    # Colour by namespace: one colour here (one namespace), and its key under the legend.
    graph.locator(".memkit-graph-colour-by").select_option("ns")
    assert graph.locator(".memkit-graph-colour-key").inner_text().strip() == "ana / bio"
    graph.locator(".memkit-graph-colour-by").select_option("type")

    # Drag a node: it stays where it was put (pinned), and its panel offers to unpin it.
    spot = page.evaluate(WHERE, [title, rare["caption"]])
    page.mouse.move(spot["x"], spot["y"])
    page.mouse.down()
    page.mouse.move(spot["x"] + 60, spot["y"] + 40, steps=8)
    page.mouse.up()
    pinned = page.evaluate(f"([t, id]) => ({PICK})(t).__memkit.nodes.get(id).fixed", [title, rare["id"]])
    assert pinned == {"x": True, "y": True}
    assert graph.locator(".memkit-graph-unpin").count() == 1

    # A click on an entity opens it: its newest memories arrive around it, each captioned when zoomed in.
    canvas = page.locator(".memkit-graph-canvas").first.bounding_box()
    assert canvas is not None
    page.mouse.click(canvas["x"] + 5, canvas["y"] + 5)
    _still(page, page.locator(".memkit-graph-canvas").first)
    # At the default fit, in the crowded centre: a click on TP53's spot opens TP53, not a neighbour over it.
    graph.locator(".memkit-graph-fit").click()  # the fit is not animated: the positions read next are final
    _still(page, page.locator(".memkit-graph-canvas").first)
    spot = page.evaluate(WHERE, [title, tp53["caption"]])
    assert spot["inside"]
    # What this click adds (a group the drag's click opened, if any, is already drawn).
    before = page.evaluate(COUNT, [title, "Memory"])
    opened = page.evaluate(f"(t) => Number(({PICK})(t).dataset.opened || 0)", title)
    page.mouse.click(spot["x"], spot["y"])
    page.wait_for_function(f"([t, n]) => Number(({PICK})(t).dataset.opened) > n", arg=[title, opened],
                           timeout=30_000)
    memories = page.evaluate(COUNT, [title, "Memory"])
    assert 0 < memories - before <= 60  # one page of TP53's memories
    # the rest fades: TP53, its memories and the entities it shares memories with are drawn over the veil
    assert page.evaluate(f"(t) => ({PICK})(t).dataset.spotlight", title) == tp53["id"]
    page.wait_for_function(f"([t, n]) => Number(({PICK})(t).dataset.lit || 0) > n", arg=[title, memories - before],
                           timeout=10_000)
    assert int(page.evaluate(f"(t) => ({PICK})(t).dataset.lit", title)) < page.evaluate(
        f"(t) => ({PICK})(t).__memkit.nodes.length", title)
    # ... drawn from the first pages the kernel set ahead, without a round trip
    assert int(page.evaluate(f"(t) => ({PICK})(t).dataset.fromReserve || '0'", title)) >= 1
    assert "of" in page.locator(".memkit-graph-group").first.inner_text()  # "60 of 2,085 memories shown"
    legend = page.evaluate(LEGEND, title)
    assert legend["Memory"] == f"Memory ({memories})"
    page.locator(".memkit-graph-fit-selection").first.click()
    # The fit animates; on a loaded machine it can take longer than a fixed pause, so wait for
    # the zoom to settle with at least five memories named.
    page.wait_for_function(f"""(t) => {{
      const g = ({PICK})(t).__memkit;
      const ids = new Set(g.nodes.getIds({{filter: (n) => n.type === 'Memory'}}));
      return g.captions().filter((c) => ids.has(c.id)).length >= 5;
    }}""", arg=title, timeout=20_000)
    captions = page.evaluate(CAPTIONS, title)
    assert all(c["px"] >= 11 for c in captions)
    assert sum(c["id"] in set(page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.getIds("
                                            "{filter: (n) => n.type === 'Memory'})", title)) for c in captions) >= 5
    graph.screenshot(path=str(ARTIFACTS / "lab-graph-scale-open.png"))

    # A memory's "used by runs": one click on the memory, one on the button, the runs are drawn.
    used = page.evaluate(f"""(t) => ({PICK})(t).__memkit.nodes.get(
        {{filter: (n) => n.type === 'Memory' && n.used_by && n.used_by.length}})[0]""", title)
    assert used is not None, "a memory of TP53 was recalled by a run"
    page.evaluate(f"([t, id]) => ({PICK})(t).__memkit.network.focus(id, {{scale: 1.5, animation: false}})",
                  [title, used["id"]])
    spot = page.evaluate(f"""([t, id]) => {{ const r = ({PICK})(t); const g = r.__memkit;
        const p = g.network.canvasToDOM(g.network.getPositions([id])[id]);
        const box = r.querySelector('canvas').getBoundingClientRect(); return {{x: box.x + p.x, y: box.y + p.y}}; }}""",
                         [title, used["id"]])
    page.mouse.click(spot["x"], spot["y"])
    panel = graph.locator(".memkit-graph-props")
    assert panel.locator(".memkit-graph-section").inner_text() == f"used by {len(used['used_by'])} runs"
    before = page.evaluate(COUNT, [title, "Step"])
    panel.locator(".memkit-graph-open-runs").click()
    page.wait_for_function(f"([t, n]) => ({PICK})(t).__memkit.nodes.get({{filter: (x) => x.type === 'Step'}})"
                           ".length > n", arg=[title, before], timeout=30_000)
    steps = page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.get({{filter: (n) => n.type === 'Step'}})", title)
    assert len(steps) - before == 5 * min(len(used["used_by"]), 6)  # the most recent runs, five ordered steps each
    recalled = page.evaluate(f"""([t, id]) => ({PICK})(t).__memkit.edges.get(
        {{filter: (e) => e.type === 'RECALLED' && e.to === id}}).length""", [title, used["id"]])
    assert recalled == min(len(used["used_by"]), 6)
    graph.screenshot(path=str(ARTIFACTS / "lab-graph-scale-runs.png"))

    # Hiding a type changes its count in the legend; showing it again restores it.
    entities = page.evaluate(LEGEND, title)["Entity"]
    graph.locator(".memkit-graph-chip[data-type='Entity']").click()
    hidden = page.evaluate(LEGEND, title)["Entity"]
    assert hidden != entities and hidden.startswith("Entity (0 of ")
    graph.locator(".memkit-graph-chip[data-type='Entity']").click()
    assert page.evaluate(LEGEND, title)["Entity"] == entities

    # The search box finds a memory that is not drawn, draws it, centres and highlights it.
    search = graph.locator(".memkit-graph-search")
    search.fill("note 17:")
    search.press("Enter")
    page.wait_for_function(f"(t) => {{ const r = ({PICK})(t); const n = r.__memkit.nodes.get(r.dataset.focused);"
                           " return n && n.caption.startsWith('note 17:'); }", arg=title, timeout=30_000)
    focused = page.evaluate(f"(t) => {{ const r = ({PICK})(t); return r.__memkit.nodes.get(r.dataset.focused); }}",
                            title)
    assert focused["type"] == "Memory"
    assert page.evaluate(f"(t) => ({PICK})(t).__memkit.network.getSelectedNodes()", title) == [focused["id"]]
    assert page.evaluate(WHERE, [title, focused["caption"]])["inside"]

    # PNG export of the current view.
    with page.expect_download() as info:
        graph.locator(".memkit-graph-png").click()
    path = info.value.path()
    assert path is not None and Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.evaluate(f"(t) => ({PICK})(t).querySelectorAll('img, script, a').length", title) == 0


def _fits(grid: Locator, area: FloatRect) -> None:
    """The grid and every header of it end inside the output cell: nothing cut at its right edge."""
    right = area["x"] + area["width"] + 1
    table = grid.locator("table.mk-grid").bounding_box()
    assert table is not None and table["x"] + table["width"] <= right, (table, area)
    for head in grid.locator("thead tr").first.locator("th").all():
        if not head.is_visible():  # a column a narrow cell leaves out
            continue
        box = head.bounding_box()
        assert box is not None and box["x"] + box["width"] <= right, (head.inner_text(), box, area)
        # each header reads whole (no column squeezed below its own name)
        assert head.evaluate("th => th.scrollWidth <= th.clientWidth + 1"), head.inner_text()


def _id_whole(grid: Locator) -> None:
    """Each id cell shows its short id and its copy button whole, inside the cell's right edge."""
    cut = grid.locator("tbody td.mk-col-short_id").evaluate_all("""tds => tds.filter((td) => {
      const right = td.getBoundingClientRect().right - parseFloat(getComputedStyle(td).paddingRight) + 1;
      return Array.from(td.querySelectorAll('.mk-id-text, .mk-copy-id')).some(
        (e) => e.getClientRects().length && e.getBoundingClientRect().right > right);
    }).map((td) => td.textContent)""")
    assert cut == [], cut


def _caption_whole(grid: Locator, area: FloatRect) -> None:
    """The line over the grid (caption, column picker, CSV, score key): each part one line inside the cell."""
    for part in (".mk-total", ".mk-columns summary", ".mk-csv", ".mk-score-legend"):
        found = grid.locator(f".mk-caption {part}")
        if not found.count():  # the score key shows with scored rows only
            continue
        box = found.bounding_box()
        assert box is not None and box["x"] + box["width"] <= area["x"] + area["width"] + 1, (part, box)
        assert box["height"] < 24, (part, box)  # one line, not a squeezed column of words


def _narrowed(page: Page, cell: Locator, width: int) -> None:
    """Wait until the cell's output fits a ``width``-pixel window (after a resize, JupyterLab lays out later)."""
    page.wait_for_function("([el, w]) => el.getBoundingClientRect().right <= w",
                           arg=[cell.locator(".jp-OutputArea-output").element_handle(), width], timeout=60_000)


def _browser_at_scale(page: Page, root: Path) -> None:
    """The NamespaceBrowser on the same store: memories first, the table across the cell, the detail beside."""
    cell = page.locator(".jp-CodeCell").nth(1)
    cell.scroll_into_view_if_needed()
    grid = cell.locator(".memkit-namespaces")
    grid.locator("tbody tr").first.wait_for(timeout=60_000)
    assert not any(t.startswith("step ") for t in grid.locator("tbody td.mk-col-text").all_inner_texts())
    area = cell.locator(".jp-OutputArea-output").bounding_box()
    table = grid.bounding_box()
    assert area is not None and table is not None
    assert table["width"] >= 0.9 * area["width"], (table, area)  # nothing opened: the table spans the cell
    _fits(grid, area)
    # the memories / traces / recalls switch is one row of buttons
    tops = {round(b["y"]) for b in (x.bounding_box() for x in cell.locator(".widget-toggle-button").all()) if b}
    assert len(tops) == 1, tops
    for button in cell.locator(".widget-toggle-button").all():  # each label whole, no ellipsis
        assert button.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), button.inner_text()
    grid.locator("tbody tr").first.click()
    detail = cell.locator(".memkit-detail")
    detail.wait_for(timeout=30_000)
    _still(page, detail)
    table, side = grid.bounding_box(), detail.bounding_box()
    assert table is not None and side is not None
    # beside it on this wide cell, never over it, and both inside the cell
    assert side["x"] >= table["x"] + table["width"] - 1 or side["y"] >= table["y"] + table["height"] - 1
    assert side["x"] + side["width"] <= area["x"] + area["width"] + 1, (side, area)
    assert table["width"] >= 0.5 * area["width"]
    _fits(grid, area)
    # the id column shows a short id, the full one on hover and behind the copy button
    first = grid.locator("tbody tr").first
    full = first.get_attribute("data-key")
    assert full is not None and len(full) == 36
    assert first.locator("td.mk-col-short_id").get_attribute("title") == full
    assert first.locator(".mk-id-text").inner_text() == full[:8]
    assert full in (first.locator(".mk-copy-id").get_attribute("title") or "")
    _id_whole(grid)
    assert not grid.locator(".mk-narrow-note").is_visible()  # the metadata column is there: nothing to say
    cell.screenshot(path=str(ARTIFACTS / "lab-namespaces-detail.png"))
    # on a narrow cell the detail goes below the table, and both still fit
    page.set_viewport_size({"width": 900, "height": 1500})
    # JupyterLab lays its panels out again after the resize, in its own time: wait for the cell to narrow
    _narrowed(page, cell, 900)
    _still(page, detail)
    narrow = cell.locator(".jp-OutputArea-output").bounding_box()
    table, side = grid.bounding_box(), detail.bounding_box()
    assert narrow is not None and table is not None and side is not None
    assert side["y"] >= table["y"] + table["height"] - 1, (table, side)
    assert side["x"] + side["width"] <= narrow["x"] + narrow["width"] + 1
    _fits(grid, narrow)
    _caption_whole(grid, narrow)
    # the metadata column gave way, and the line over the grid says where it went
    assert not grid.locator("td.mk-col-metadata").first.is_visible()
    note = grid.locator(".mk-caption .mk-narrow-note")
    assert note.is_visible() and note.inner_text().startswith("metadata: in the detail"), note.inner_text()
    _id_whole(grid)
    # the controls wrap inside the cell; the switch stays one row of whole buttons
    buttons = [b.bounding_box() for b in cell.locator(".widget-toggle-button").all()]
    assert len({round(b["y"]) for b in buttons if b}) == 1, buttons
    assert all(b and b["x"] + b["width"] <= narrow["x"] + narrow["width"] + 1 for b in buttons), (buttons, narrow)
    cell.screenshot(path=str(ARTIFACTS / "lab-namespaces-narrow.png"))
    page.set_viewport_size({"width": 1400, "height": 1500})
    page.wait_for_function("el => el.getBoundingClientRect().right > 1000",
                           arg=cell.locator(".jp-OutputArea-output").element_handle())
    _still(page, detail)
    # words wrap whole: no line of the memory text ends inside a word
    assert detail.locator("pre").first.evaluate("p => getComputedStyle(p).wordBreak") == "normal"
    # A column filter works over the whole namespace, not the page: its count is the store's, its
    # rows go on past the first page, and the CSV holds every one of them (none of ben's TP53 notes).
    with memkit.open(f"sqlite:///{root / 'scale.db'}?embedder=none") as mem:
        expected = [i.content for i in mem.get_page("ana", "bio", offset=0, limit=10_000,
                                                    filters={"type": {"$ne": "trace"}}) if "tp53" in i.content.lower()]
    assert len(expected) > 40
    grid.locator(".mk-col-filter-text").press_sequentially("tp53", delay=30)
    first = f"memories 1–20 of {len(expected):,} matching the column filters"
    page.wait_for_function("([el, want]) => el.querySelector('.mk-total')?.textContent === want",
                           arg=[grid.element_handle(), first], timeout=30_000)
    assert grid.locator(".mk-col-filter-text").input_value() == "tp53"  # what was typed stays in the box
    texts = grid.locator("tbody td.mk-col-text").all_inner_texts()
    assert len(texts) == 20 and all("TP53" in t for t in texts)
    cell.screenshot(path=str(ARTIFACTS / "lab-namespaces-scale.png"))
    cell.locator("button", has_text="older").click()
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.startsWith('memories 21–40 of')",
                           arg=grid.element_handle(), timeout=30_000)
    later = grid.locator("tbody td.mk-col-text").all_inner_texts()
    assert len(later) == 20 and all("TP53" in t for t in later) and not set(later) & set(texts)
    with page.expect_download() as info:
        grid.locator(".mk-csv").click()
    path = info.value.path()
    assert path is not None
    with Path(path).open(encoding="utf-8", newline="") as f:
        exported = list(csv.reader(f))
    assert exported[0] == ["#", "created", "memory", "metadata", "id"]
    assert sorted(r[2] for r in exported[1:]) == sorted(expected)  # every matching row, each once
    grid.locator(".mk-message", has_text=f"CSV: {len(expected):,} rows").wait_for(timeout=10_000)
    # A search shows its best 20 hits; its CSV holds every hit the store finds, best first, and says so.
    with memkit.open(f"sqlite:///{root / 'scale.db'}?embedder=none") as mem:
        hits = [i.content for i in mem.search("EGFR", "ana", "bio", 10_000, {"type": {"$ne": "trace"}}, mode="keyword")
                if i.score is None or i.score > 0]
    assert len(hits) > 20
    grid.locator(".mk-col-filter-text").fill("")
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.startsWith('memories 1–20 (of')",
                           arg=grid.element_handle(), timeout=30_000)
    cell.locator("input[placeholder^='search text']").fill("EGFR")
    cell.locator("input[placeholder^='search text']").press("Enter")
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.includes(\"matches for 'EGFR'\")",
                           arg=grid.element_handle(), timeout=30_000)
    assert len(grid.locator("tbody td.mk-col-text").all_inner_texts()) == 20
    with page.expect_download() as info:
        grid.locator(".mk-csv").click()
    path = info.value.path()
    assert path is not None
    with Path(path).open(encoding="utf-8", newline="") as f:
        exported = list(csv.reader(f))
    text = exported[0].index("memory")
    assert [r[text] for r in exported[1:]] == hits  # every hit, in the store's order, not the page of 20
    grid.locator(".mk-message", has_text=f"CSV: every hit of the search, {len(hits):,} rows").wait_for(timeout=10_000)
    _fits(grid, area)  # with the score column too
    _id_whole(grid)
    _caption_whole(grid, area)
    cell.screenshot(path=str(ARTIFACTS / "lab-namespaces-search-csv.png"))
    cell.locator("input[placeholder^='search text']").fill("")
    cell.locator("input[placeholder^='search text']").press("Enter")
    cell.locator(".widget-toggle-button", has_text="recalls").click()
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.startsWith('recalls')",
                           arg=grid.element_handle(), timeout=30_000)
    assert grid.locator("th", has_text="query").count() == 1
    with page.expect_download() as info:
        grid.locator(".mk-csv").click()
    path = info.value.path()
    assert path is not None and Path(path).read_text(encoding="utf-8").startswith("#,created,query")
    # Deleting asks first, naming what and how many. The recalls' rows stay on screen until the
    # kernel sends the memories: a click before then opens a recall (no delete button), so wait for them.
    cell.locator(".widget-toggle-button", has_text="memories").click()
    page.wait_for_function("el => el.querySelector('.mk-total')?.textContent.startsWith('memories')",
                           arg=grid.element_handle(), timeout=60_000)
    first = grid.locator("tbody tr").first
    key = first.get_attribute("data-key")
    assert key is not None and len(key) == 36
    first.click()
    # the kernel opens the memory beside the table and enables its delete button
    detail.wait_for(timeout=60_000)
    delete = cell.locator("button", has_text="delete…")
    expect(delete).to_be_enabled(timeout=60_000)
    delete.click()
    cell.get_by_text("Delete 1 memory from").wait_for(timeout=60_000)
    assert "Delete 1 memory from ana / bio" in cell.inner_text()
    assert cell.locator("img, script").count() == 0


def test_a_grouped_page_opens_groups_without_a_kernel(browser: Browser, site: tuple[str, Path]) -> None:  # noqa: F811
    """`memkit graph --group entity`: the overview in a file, a click opening a group's first page."""
    base, root = site
    db = root / "g.db"
    with memkit.open(f"sqlite:///{db}?embedder=none") as mem:
        fill_scale(mem, n=1_000, runs=4)
    out = root / "grouped.html"
    done = subprocess.run([sys.executable, "-m", "memkit", "--url", f"sqlite:///{db}?embedder=none", "graph",
                           "--html", str(out), "--user", "ana", "--agent", "bio", "--group", "entity"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.goto(f"{base}/grouped.html")
    title = "namespace ana / bio"
    _settled(page, title)
    assert page.evaluate(COUNT, [title, "Memory"]) == 0
    captions = page.evaluate(CAPTIONS, title)
    assert captions and all(c["px"] >= 11 for c in captions)
    tp53 = page.evaluate(f"(t) => ({PICK})(t).__memkit.nodes.get({{filter: (n) => n.caption.startsWith('TP53 (')}})[0]",
                         title)
    spot = page.evaluate(WHERE, [title, tp53["caption"]])
    page.mouse.click(spot["x"], spot["y"])
    page.wait_for_function(f"(t) => Number(({PICK})(t).dataset.opened) > 0", arg=title, timeout=10_000)
    assert page.evaluate(COUNT, [title, "Memory"]) == min(60, tp53["count"])
    assert "more in the live widget" in page.inner_text(".memkit-graph-message")
    page.screenshot(path=str(ARTIFACTS / "graph-grouped-page.png"))
    _distinct_colours(page, title)
    _readable(page, title)  # the opened group's notes: no caption over a node, no node over another
    assert _pwned(page) == [None] and outside == []
