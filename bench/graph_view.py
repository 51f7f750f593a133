"""How the graph view holds up at scale: the kernel side and headless Chromium.

Kernel: ``memory_graph`` of a ``--memories`` namespace (SQLite, newest 1,000 memories)
plus the representative cut and the browser payload, as GraphExplorer.draw does it.

Browser (Debian's /usr/bin/chromium through Playwright, a 127.0.0.1 file server): synthetic
namespaces of 2,000 and 10,000 drawn nodes (memories with genes and topics) through the
standalone page, three routes:

- ``physics``: vis-network lays the graph out itself (barnesHut, stabilisation capped at 150
  iterations, physics off afterwards), no start positions;
- ``start+physics``: memkit's precomputed start positions, then the same capped stabilisation
  (the default up to 150 nodes, ``PHYSICS_LIMIT``);
- ``precomputed``: the precomputed layout drawn as is, physics off (the default above).

For each: time from navigation to the layout settled (``data-settled``), the longest main-thread
task while loading (a freeze is a long task), and how long one redraw takes once settled (what a
drag or zoom costs). Medians over ``--repeat`` runs.

    .venv/bin/python bench/graph_view.py --memories 100000 --repeat 3

``--grouped`` measures the default view of a researcher's store instead: 5,000 memories with
runs and recalls (``tests/graph_scale.py``, about 20,000 edges) drawn grouped through the
standalone page: time to the first drawing (interactive), to settled, and opening the largest
group (the kernel's part, building the message, and the browser's part, drawing it). Medians.

    .venv/bin/python bench/graph_view.py --grouped --repeat 5

``--lab`` measures opening a group the way a researcher does it: the same store in a live
GraphExplorer in JupyterLab (127.0.0.1, its own temporary root), a real mouse click on a group and
the time from the press to the first drawing after the kernel's answer is added, the widget's
round trip (browser to kernel and back over the comm) included, and the page's main-thread CPU time
for the click (Chromium's ThreadTime; a loaded machine inflates it far less than wall time). The
``--repeat`` largest groups are opened one after another, each once; the median is printed.

    .venv/bin/python bench/graph_view.py --lab --repeat 5
"""

from __future__ import annotations

import argparse
import copy
import functools
import http.server
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import memkit
from memkit._core._graph_model import graph_from_parts
from memkit._core._graph_schema import record_parts
from memkit._core._records import Record
from memkit.graph import MemoryGraph, memory_graph
from memkit.graph._page import page_from_payload, payload
from memkit.graph._view import select

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
GENES = [f"G{i}" for i in range(300)]
LONG_TASKS = """
window.__long = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__long = Math.max(window.__long, e.duration);
}).observe({type: 'longtask', buffered: true});
"""


def synthetic(nodes: int) -> MemoryGraph:
    """About ``nodes`` nodes: memories mentioning a gene (Zipf-like) and a topic, in one namespace."""
    rng = random.Random(7)
    records = []
    memories = int(nodes * 0.85)
    for i in range(memories):
        popular = GENES[min(int(rng.paretovariate(1.2)) - 1, len(GENES) - 1)]
        gene = popular if rng.random() < 0.7 else rng.choice(GENES)
        records.append(Record(id=f"m{i}", user_id="u", agent_id="a", content=f"note {i} on {gene}",
                              metadata={"gene": gene, "topic": f"t{rng.randint(0, 40)}"}, created_us=i))
    graph = graph_from_parts(record_parts(r) for r in records)
    extra = nodes - len(graph.nodes)
    if extra > 0:  # top up with memories that mention new genes so the count is exact
        more = [Record(id=f"x{i}", user_id="u", agent_id="a", content=f"x{i}", metadata={"gene": f"X{i}"},
                       created_us=memories + i) for i in range(extra // 2)]
        graph = graph_from_parts([*(record_parts(r) for r in records), *(record_parts(r) for r in more)])
    return graph


def kernel(n: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, memkit.open(f"sqlite:///{Path(tmp) / 'big.db'}?embedder=none") as mem:
        rng = random.Random(3)
        start = time.perf_counter()
        for lo in range(0, n, 10_000):
            genes = [rng.choice(GENES[:12]) for _ in range(lo, min(lo + 10_000, n))]
            mem.add_many([{"content": f"note {lo + j}: {gene} variant", "user_id": "big", "agent_id": "bio",
                           "metadata": {"gene": gene, "topic": f"t{(lo + j) % 9}"}} for j, gene in enumerate(genes)])
        print(f"store: {n:,} memories in one namespace, filled in {time.perf_counter() - start:.0f} s")
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            graph = memory_graph(mem, user_id="big", agent_id="bio")
            view = select(graph, 300)
            payload(view)
            runs.append(time.perf_counter() - t0)
        print(f"kernel: memory_graph (newest 1,000) + cut to 300 + payload: median {statistics.median(runs):.3f} s"
              f" (runs {', '.join(f'{r:.3f}' for r in runs)}); {view.message[:90]}…")


ROUTES = ("physics", "start+physics", "precomputed")


def pages(root: Path, sizes: list[int], routes: list[str]) -> list[tuple[str, int]]:
    out = []
    for n in sizes:
        graph = synthetic(n)
        base = payload(select(graph, n), f"{n} nodes")
        for route in routes:
            data = copy.deepcopy(base)
            if route == "physics":
                for node in data["nodes"]:
                    node.pop("x", None)
                    node.pop("y", None)
            data["physics"] = route != "precomputed"
            data["iterations"] = 150
            name = f"{n}-{route.replace('+', '-')}.html"
            (root / name).write_text(page_from_payload(data, f"{n} nodes"), encoding="utf-8")
            out.append((name, len(data["nodes"])))
    return out


def browser(sizes: list[int], routes: list[str], repeat: int) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = pages(root, sizes, routes)
        handler = functools.partial(_Quiet, directory=str(root))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            with sync_playwright() as p:
                chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
                print(f"{'page':<28} {'nodes':>6} {'settled s':>10} {'longest task ms':>16} {'redraw ms':>10}")
                for name, count in files:
                    rows = [_measure(chromium, f"{base}/{name}") for _ in range(repeat)]
                    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                    print(f"{name:<28} {count:>6} {med['settled']:>10.2f} {med['longest']:>16.0f}"
                          f" {med['redraw']:>10.0f}")
                chromium.close()
        finally:
            server.shutdown()
            server.server_close()


def _measure(chromium: Any, url: str) -> dict[str, float]:
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(LONG_TASKS)
    page = context.new_page()
    page.goto(url, wait_until="commit", timeout=180_000)
    page.wait_for_selector(".memkit-graph[data-settled='1']", state="attached", timeout=180_000)
    settled = page.evaluate("() => window.__memkitGraphSettled") / 1000
    page.wait_for_timeout(300)
    redraw = page.evaluate("""() => { const g = document.querySelector('.memkit-graph').__memkit;
        const t = performance.now(); g.network.redraw(); g.network.moveTo({scale: 0.8}); g.network.redraw();
        return (performance.now() - t) / 2; }""")
    longest = page.evaluate("() => window.__long")
    context.close()
    return {"settled": settled, "longest": longest, "redraw": redraw}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def grouped(repeat: int) -> None:
    import sys

    from playwright.sync_api import sync_playwright

    from memkit.graph._style import style_edges, style_nodes
    from memkit.graph._view import expansion
    from memkit.widgets._graph import _with_namespace_recalls

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from graph_scale import fill_scale

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mem = memkit.open(f"sqlite:///{root / 'scale.db'}?embedder=none")
        fill_scale(mem)
        graph = _with_namespace_recalls(mem, memory_graph(mem, "ana", "bio", limit=10_000), "ana", "bio")
        print(f"store: {graph.node_types().get('Memory', 0):,} memories, {len(graph.nodes):,} nodes,"
              f" {len(graph.edges):,} edges")
        kernel_view, kernel_open = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            view = select(graph, 300, "entity")
            data = payload(view, "namespace ana / bio")
            kernel_view.append(time.perf_counter() - t0)
            biggest = max(view.counts, key=lambda g: view.counts[g] if any(n.id == g for n in view.nodes) else -1)
            t0 = time.perf_counter()
            fresh, edges, where, _ = expansion(view, biggest, {n.id for n in view.nodes})
            message = {"event": "expanded", "id": biggest, "group": biggest, "shown": len(fresh), "message": "",
                       "nodes": [{**n, "offset": list(where[n["id"]])} for n in style_nodes(
                           fresh, view.graph, layout="grouped", groups=view.groups)], "edges": style_edges(edges)}
            kernel_open.append(time.perf_counter() - t0)
        print(f"kernel: grouped view + payload median {statistics.median(kernel_view) * 1000:.0f} ms;"
              f" opening the largest group ({view.counts[biggest]:,} members, {len(fresh)} drawn)"
              f" median {statistics.median(kernel_open) * 1000:.1f} ms; first view {len(data['nodes'])} items")
        (root / "grouped.html").write_text(page_from_payload(data, "grouped"), encoding="utf-8")
        import json
        (root / "open.json").write_text(json.dumps(message), encoding="utf-8")
        handler = functools.partial(_Quiet, directory=str(root))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        rows = []
        try:
            with sync_playwright() as p:
                chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
                for _ in range(repeat):
                    context = chromium.new_context(viewport={"width": 1400, "height": 900})
                    context.add_init_script(LONG_TASKS)
                    page = context.new_page()
                    page.goto(f"{base}/grouped.html", wait_until="commit")
                    page.wait_for_selector(".memkit-graph[data-settled='1']", state="attached", timeout=60_000)
                    first = page.evaluate("() => window.__memkitGraphFirstDrawn") / 1000
                    settled = page.evaluate("() => window.__memkitGraphSettled") / 1000
                    opened = page.evaluate("""async (url) => { const msg = await (await fetch(url)).json();
                        const root = document.querySelector('.memkit-graph'); const model = root.__model;
                        const t = performance.now(); root.__open(msg); root.__memkit.network.redraw();
                        return performance.now() - t; }""", f"{base}/open.json")
                    arranged = float(page.evaluate(
                        "() => document.querySelector('.memkit-graph').dataset.arrangeMs || 'nan'"))
                    rows.append((first, settled, opened, page.evaluate("() => window.__long"), arranged))
                    context.close()
                chromium.close()
        finally:
            server.shutdown()
            server.server_close()
        print(f"browser (median of {repeat}): first drawn {statistics.median(r[0] for r in rows):.2f} s,"
              f" settled {statistics.median(r[1] for r in rows):.2f} s,"
              f" opening the largest group {statistics.median(r[2] for r in rows):.0f} ms,"
              f" longest task while loading {statistics.median(r[3] for r in rows):.0f} ms,"
              f" of which spacing the settled layout {statistics.median(r[4] for r in rows):.0f} ms")
        mem.close()


PICK = ("(title) => Array.from(document.querySelectorAll('.memkit-graph')).find(r => "
        "r.querySelector('.memkit-graph-title').textContent.startsWith(title))")
# Before the click: time from the press (the event's timestamp shares performance.now's clock) to the
# first drawing after the widget has added the kernel's answer.
ARM = f"""([title, id]) => {{
  const r = ({PICK})(title); const g = r.__memkit; const before = Number(r.dataset.opened || 0);
  window.__open = null;
  r.querySelector('canvas').addEventListener('pointerdown', (e) => {{
    const t0 = e.timeStamp;
    const seen = new MutationObserver(() => {{
      if (Number(r.dataset.opened || 0) <= before) return;
      seen.disconnect();
      g.network.once('afterDrawing', () => {{
        window.__open = {{total: performance.now() - t0, browser: Number(r.dataset.lastOpenMs),
                          clicked: g.network.getSelectedNodes()[0] === id}};
      }});
      g.network.redraw();
    }});
    seen.observe(r, {{attributes: true, attributeFilter: ['data-opened']}});
  }}, {{once: true, capture: true}});
  g.network.focus(id, {{scale: 1.2, animation: false}});
  const p = g.network.canvasToDOM(g.network.getPositions([id])[id]);
  const box = r.querySelector('canvas').getBoundingClientRect();
  return {{x: box.x + p.x, y: box.y + p.y}};
}}"""


def lab_open(repeat: int) -> None:
    import os
    import signal
    import socket
    import subprocess
    import sys
    import urllib.request
    import uuid

    import nbformat
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    source = (Path(__file__).resolve().parents[1] / "tests" / "graph_scale.py").read_text(encoding="utf-8")
    title = "namespace ana / bio"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = f"sqlite:///{root / 'scale.db'}?embedder=none"
        cells = [f"{source}\nimport memkit\nfrom memkit.widgets import GraphExplorer\nmem = memkit.open({url!r})\n"
                 "fill_scale(mem)",
                 "gx = GraphExplorer(mem)\ngx.namespace.value = ('ana', 'bio')\ngx.draw()\ngx"]
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, root / "bench.ipynb")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        token = uuid.uuid4().hex
        log = (root / "lab.log").open("w")
        lab = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
             f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--allow-root"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "BROWSER": "true"}, start_new_session=True)
        rows: list[dict[str, Any]] = []
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline or lab.poll() is not None:
                        raise RuntimeError("JupyterLab did not start: " + (root / "lab.log").read_text()) from None
                    time.sleep(0.5)
            with sync_playwright() as p:
                chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
                page = chromium.new_page(viewport={"width": 1400, "height": 1000})
                # the page's main-thread CPU time (ThreadTime) around each click: what a loaded machine
                # does not inflate the way it inflates wall time
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")

                def cpu() -> float:
                    return float(next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                                      if m["name"] == "ThreadTime"))

                page.goto(f"http://127.0.0.1:{port}/lab/tree/bench.ipynb?token={token}")
                page.wait_for_selector(".jp-Notebook", timeout=90_000)
                page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
                page.keyboard.press("Escape")
                page.click(".jp-Notebook")
                page.get_by_text("Run", exact=True).first.click()
                page.get_by_text("Run All Cells", exact=True).first.click()
                page.wait_for_function(f"(t) => {{ const r = ({PICK})(t); return r && r.dataset.settled === '1'; }}",
                                       arg=title, timeout=300_000)
                page.evaluate(f"(t) => ({PICK})(t).scrollIntoView({{block: 'start'}})", title)
                groups = page.evaluate(f"""(t) => ({PICK})(t).__memkit.nodes.get({{filter: (n) => n.group}})
                    .sort((a, b) => b.count - a.count).map((n) => [n.id, n.caption, n.count])""", title)
                for gid, caption, count in groups:
                    if len(rows) == repeat:
                        break
                    spot = page.evaluate(ARM, [title, gid])
                    page.wait_for_timeout(300)
                    before = cpu()
                    page.mouse.click(spot["x"], spot["y"])
                    try:  # a group under an opened one's members is not where the click lands: the next one
                        page.wait_for_function("() => window.__open !== null", timeout=10_000)
                    except PlaywrightTimeout:
                        print(f"  {caption}: the click did not open it, skipped")
                        continue
                    row = {**page.evaluate("() => window.__open"), "cpu": (cpu() - before) * 1000}
                    if not row["clicked"]:
                        print(f"  {caption}: the click opened another node, skipped")
                        continue
                    rows.append({**row, "caption": caption, "count": count})
                    print(f"  {caption}: {row['total']:.0f} ms click to drawn ({row['browser']:.0f} ms adding it,"
                          f" {row['cpu']:.0f} ms of main-thread CPU)")
                chromium.close()
        finally:
            os.killpg(lab.pid, signal.SIGTERM)
            try:
                lab.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(lab.pid, signal.SIGKILL)
                lab.wait(5)
            log.close()
        print(f"JupyterLab widget (median of {len(rows)} groups, each opened once): opening a group"
              f" {statistics.median(r['total'] for r in rows):.0f} ms from the click to drawn, of which"
              f" {statistics.median(r['browser'] for r in rows):.0f} ms adding it in the browser;"
              f" the page's main thread busy {statistics.median(r['cpu'] for r in rows):.0f} ms of CPU per click")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--routes", nargs="+", choices=ROUTES, default=list(ROUTES))
    parser.add_argument("--skip-kernel", action="store_true")
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument("--grouped", action="store_true", help="the grouped first view of 5,000 memories")
    parser.add_argument("--lab", action="store_true", help="opening a group in a live JupyterLab widget")
    args = parser.parse_args()
    if args.lab:
        lab_open(args.repeat)
        return
    if args.grouped:
        grouped(args.repeat)
        return
    if not args.skip_kernel:
        kernel(args.memories, args.repeat)
    if not args.skip_browser:
        browser(args.sizes, args.routes, args.repeat)


if __name__ == "__main__":
    main()
