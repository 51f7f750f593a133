"""Every HTML page memkit writes, opened in headless Chromium with hostile text in every field it shows.

The pages: the pyvis export (``to_pyvis().generate_html()``), the standalone graph page
(``MemoryGraph.to_html``, plain and grouped), ``memkit graph --html``, the panels' static snapshots
(``snapshot_html``) and the runs frame's notebook table. The store holds one hostile string as a
memory's content, a metadata key and value, the user and agent ids, a workflow, a run, a step's name,
tool and error. The string carries the word ``href`` (which made pyvis show tooltips through
``innerHTML``), an ``<img onerror>`` and a ``<script>`` that set ``window.__pwned`` and call
``alert``, and an image from outside. Every node of a graph page is hovered (its tooltip shown)
and clicked. Each page must run none of it and request nothing but itself: screenshots in
.artifacts/page-*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page
from test_browser import ARTIFACTS, _guarded_page, _pwned, browser, site  # noqa: F401

import memkit
from memkit._serve._cli import main as cli_main
from memkit.frames import runs_frame
from memkit.graph import memory_graph
from memkit.widgets import Dashboard, NamespaceBrowser, TraceReplay
from memkit.widgets._static import snapshot_html

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs the Debian package chromium (make install-test)"),
]

HOSTILE = ('href <img src=x onerror="window.__pwned=1;alert(1)"><script>window.__pwned=2;alert(2)</script>'
           '<img src="https://example.org/p.png"> &amp; "quoted" \'single\'')
# Ids are hostile too; they may not hold control characters, which HOSTILE does not.
USER, AGENT = f"u {HOSTILE}", f"a {HOSTILE}"


def _fill(mem: memkit.Memory) -> None:
    mem.add(HOSTILE, USER, AGENT, {"gene": "TP53", "topic": HOSTILE, HOSTILE: "key", "nested": {HOSTILE: [HOSTILE]}})
    mem.add("BRCA1 and TP53 interact at DNA damage sites", USER, AGENT, {"gene": ["BRCA1", "TP53"]})
    for index, status in ((0, "success"), (1, "failed")):
        mem.add_trace(AGENT, f"wf {HOSTILE}", {
            "step_index": index, "step_name": f"step {HOSTILE}", "tool": f"tool {HOSTILE}", "status": status,
            "run_id": f"run {HOSTILE}", "duration": 1.5, "error": HOSTILE if status == "failed" else None,
            "parameters": {HOSTILE: HOSTILE}, "result": {"out": HOSTILE},
        }, user_id=USER)


def _pages(mem: memkit.Memory, url: str, root: Path) -> list[str]:
    graph = memory_graph(mem)
    (root / "pyvis.html").write_text(graph.to_pyvis().generate_html(), encoding="utf-8")
    graph.to_html(str(root / "graph.html"), title=HOSTILE)
    graph.to_html(str(root / "grouped.html"), title=HOSTILE, group="entity")
    assert cli_main(["--url", url, "graph", "--user", USER, "--agent", AGENT, "--html", str(root / "cli.html")]) == 0
    browser_panel = NamespaceBrowser(mem, page_size=8)
    browser_panel.namespace.value = (USER, AGENT)
    browser_panel.rows.value = browser_panel.items[-1].id
    # TraceReplay draws in the browser (anywidget): its snapshot is its ipywidgets part, no user text.
    panels: dict[str, Any] = {"namespaces": browser_panel, "traces": TraceReplay(mem), "dashboard": Dashboard(mem)}
    for name, panel in panels.items():
        (root / f"{name}.html").write_text(snapshot_html(panel, title=HOSTILE), encoding="utf-8")
    table = runs_frame(mem)._repr_html_()
    (root / "runs.html").write_text(f"<!DOCTYPE html><html><body>{table}</body></html>", encoding="utf-8")
    return ["pyvis", "graph", "grouped", "cli", *panels, "runs"]


# Every drawn node's place on screen: pyvis keeps its network in a global, memkit's page on its root.
NODES = """() => {
  const roots = Array.from(document.querySelectorAll('.memkit-graph')).map((r) => r.__memkit.network);
  const nets = roots.length ? roots : (typeof network === 'undefined' ? [] : [network]);
  const out = [];
  for (const net of nets) {
    const where = net.getPositions();
    for (const id of Object.keys(where)) {
      const p = net.canvasToDOM(where[id]);
      const box = net.body.container.getBoundingClientRect();
      out.push({x: p.x + box.left, y: p.y + box.top});
    }
  }
  return out;
}"""


def _touch_every_node(page: Page) -> tuple[int, int]:
    """Hover (tooltip shown) and click each node; how many nodes, and how many tooltips showed the text."""
    spots = page.evaluate(NODES)
    tooltips = 0
    for spot in spots:
        page.mouse.move(spot["x"], spot["y"])
        page.wait_for_timeout(350)  # vis-network's tooltip delay is 150 ms
        shown = page.evaluate("() => Array.from(document.querySelectorAll('.vis-tooltip'))"
                              ".filter((t) => t.style.visibility !== 'hidden').map((t) => t.innerText).join(' ')")
        tooltips += "<img src=x onerror=" in shown
        page.mouse.click(spot["x"], spot["y"])
    return len(spots), tooltips


def test_every_page_is_inert_and_offline(browser: Browser, site: tuple[str, Path]) -> None:  # noqa: F811
    base, root = site
    url = f"sqlite:///{root / 'store.db'}"
    with memkit.open(url) as mem:
        _fill(mem)
        names = _pages(mem, url, root)
    ARTIFACTS.mkdir(exist_ok=True)
    for name in names:
        outside: list[str] = []
        dialogs: list[str] = []
        page = _guarded_page(browser, outside)
        page.on("dialog", lambda d, seen=dialogs: (seen.append(d.message), d.dismiss()))
        page.goto(f"{base}/{name}.html")
        page.wait_for_load_state("load")
        page.wait_for_timeout(1500 if name in ("pyvis", "graph", "grouped", "cli") else 300)
        text = page.inner_text("body")
        nodes, tooltips = _touch_every_node(page)
        if name in ("pyvis", "graph", "grouped", "cli"):
            assert nodes >= 3, name
        if name in ("pyvis", "graph", "cli"):
            assert tooltips >= 1, f"{name}: no tooltip showed the hostile text as text"
        elif name != "traces":
            assert "<img src=x onerror=" in text, f"{name}: the hostile text is not shown as text"
        page.screenshot(path=str(ARTIFACTS / f"page-{name}.png"))
        injected = page.evaluate("() => document.querySelectorAll('img[onerror], script:not([src]) + img').length")
        assert (name, _pwned(page), dialogs, outside, injected) == (name, [None], [], [], 0)
        page.context.close()
