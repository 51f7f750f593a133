"""Write and execute the notebooks (run from the repository root after changing them).

    .venv/bin/python notebooks/build_notebooks.py

The executed outputs are committed; ``make test`` re-runs the notebooks with
nbval and compares the outputs against them (see notebooks/sanitize.cfg).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent

SETUP = '''\
import tempfile
from pathlib import Path

import memkit
from memkit._demo import demo_items

# A fresh copy of the seeded demo sample, so this notebook shows the same thing everywhere.
# For your own store: mem = memkit.open("sqlite:///data/memory.db") (what `make lab` loads).
store = Path(tempfile.mkdtemp(prefix="memkit-nb-")) / "demo.db"
mem = memkit.open(f"sqlite:///{store}")
mem.add_many(demo_items())
stats = mem.stats()
print(f"{stats.memories} memories ({stats.traces} trace steps) in {stats.namespaces} namespaces")'''


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text)


def code(text: str, ignore_output: bool = False) -> nbformat.NotebookNode:
    if ignore_output:
        text = "# NBVAL_IGNORE_OUTPUT\n# (the graph is a large self-contained HTML page)\n" + text
    return nbformat.v4.new_code_cell(text)


TOUR = [
    md("# A tour of memkit\n\nmemkit gives AI agents long-term memory and lets you look inside it. This tour "
       "opens the demo store (three users x three research agents: planner, bioinformatics, executor, with "
       "workflow traces), shows the dashboard, runs a search, replays a trace and draws a graph.\n\n"
       "Everything here works on any store: `memkit.open(\"sqlite:///data/memory.db\")`, `memory://`, or a "
       "graph backend."),
    code(SETUP),
    md("## The dashboard\n\nThree tabs: **Namespaces** (page through memories, search, open one, delete), "
       "**Traces** (replay a workflow step by step), **Graph** (a namespace or a workflow as a network)."),
    code("from memkit.widgets import Dashboard\n\ndash = Dashboard(mem)\ndash"),
    md("## A search\n\nKeyword search ranks one namespace's memories (BM25); the filter leaves the trace steps "
       "out; `score_details` says how each hit was found."),
    code('not_traces = {"type": {"$ne": "trace"}}\n'
         'hits = mem.search("TP53 BLAST homologs", user_id="alice", agent_id="bioinformatics", limit=3,\n'
         '                  filters=not_traces)\n'
         'for hit in hits:\n'
         '    print(f"{hit.score:6.2f}  {hit.content[:90]}")\n'
         'hits[0].score_details'),
    md("The same search from the panel: set the box and press the button (this is what your clicks do)."),
    code('browser = dash.browser\nbrowser.namespace.value = ("alice", "bioinformatics")\n'
         'browser.query.value = "TP53 BLAST homologs"\nbrowser.filters.value = \'{"type": {"$ne": "trace"}}\'\n'
         'browser.search_button.click()\n'
         'print(browser.page_label.value)\n'
         'browser.rows.value = browser.items[0].id  # open the best hit in the detail view\n'
         'print(browser.selected.content)'),
    md("## A trace\n\nEach workflow run is stored as one trace record per step. The **Traces** tab replays it; "
       "here is its step table and the step the slider points at."),
    code('replay = dash.replay\nreplay.workflow.value = ("alice", "bioinformatics", "variant-calling-alice-1")\n'
         'replay.frame[["step_index", "step_name", "tool", "status", "duration", "retry_count", "error"]]'),
    code("replay.next_button.click()\nreplay.next_button.click()\nrow = replay.frame.iloc[replay.step.value]\n"
         'print(f"step {replay.step.value + 1}: {row.step_name} with {row.tool} -> {row.status}")'),
    md("Across all runs, which tools fail and how?"),
    code("import pandas as pd\n\nfrom memkit.widgets._traces import failure_patterns, tool_stats, trace_frame\n\n"
         "runs = pd.concat([trace_frame(mem, *key) for _, key in replay.workflow.options], ignore_index=True)\n"
         "tool_stats(runs).sort_values(\"failure_rate\", ascending=False).head(6)"),
    code("failure_patterns(runs)"),
    md("## The graph\n\nA namespace: its memories and the genes, tools and topics they mention. Colour is the node "
       "type, size the number of connections. The view is offline: vis-network is embedded, nothing is fetched, "
       "and memory text is shown as text."),
    code('explorer = dash.explorer\nexplorer.namespace.value = ("alice", "bioinformatics")\n'
         "explorer.draw_button.click()\nprint(explorer.view.message)\n"
         "print(sorted({node.type for node in explorer.view.nodes}))"),
    code("from IPython.display import HTML\n\nHTML(explorer.view_html.value)", ignore_output=True),
    md("Next: `01_namespaces.ipynb` goes through the namespace browser in detail."),
]

NAMESPACES = [
    md("# Namespaces\n\nEvery memory lives in one `(user_id, agent_id)` namespace, and nothing crosses between "
       "them. `NamespaceBrowser` lists them and pages through one at a time, so it stays quick on a store with "
       "100,000 memories (`bench/bench_widgets.py`)."),
    code(SETUP),
    code("import pandas as pd\n\n"
         "pd.DataFrame([ns.model_dump() for ns in mem.namespaces()])[[\"user_id\", \"agent_id\", \"count\"]]"),
    code("from memkit.widgets import NamespaceBrowser\n\nbrowser = NamespaceBrowser(mem, page_size=5)\n"
         'browser.namespace.value = ("bob", "planner")\nbrowser'),
    md("## Paging\n\nPages come from `get_page` (newest first); only one page is in memory."),
    code("print(browser.page_label.value)\nfor item in browser.items:\n    print(' ', item.content[:100])"),
    code("browser.next_button.click()\nprint(browser.page_label.value)\n"
         "print('newer page available:', not browser.prev_button.disabled)"),
    md("## Metadata filters\n\nA JSON object with equality or `$eq $ne $in $nin $gt $gte $lt $lte`. A mistake "
       "shows a clear message and leaves the table as it was."),
    code('browser.filters.value = \'{"priority": "high"}\'\nbrowser.search_button.click()\n'
         "print(browser.page_label.value)\n"
         "print({item.metadata['priority'] for item in browser.items})"),
    code('browser.filters.value = \'{"priority": high}\'\nbrowser.search_button.click()\n'
         "print(browser.status.value)"),
    code('browser.filters.value = \'{"gene": {"$in": ["TP53", "KRAS"]}}\'\nbrowser.search_button.click()\n'
         "print(browser.page_label.value, sorted({item.metadata['gene'] for item in browser.items}))"),
    md("## Search modes\n\nOnly the modes the store supports are offered: the plain SQLite store has keyword "
       "search; a store with an embedder adds semantic and hybrid."),
    code('browser.filters.value = ""\nbrowser.query.value = "orthologues vertebrates"\n'
         "print(browser.mode.options)\nbrowser.search_button.click()\n"
         "for item in browser.items[:3]:\n    print(f'{item.score:5.2f}  {item.content[:90]}')"),
    md("## Detail and delete\n\nPick a row to see its content, metadata and how it was found. Delete asks "
       "first."),
    code("browser.rows.value = browser.items[0].id\nprint(browser.selected.metadata)\n"
         "browser.delete_button.click()\nprint('confirm shown:', browser.confirm_box.layout.display)"),
    code("target = browser.selected.id\nbrowser.confirm_button.click()\n"
         "print(browser.status.value)\nprint('still there:', mem.get(target) is not None)"),
    md("## Hostile text stays text\n\nMemory text can contain anything. Everything the panels show as HTML is "
       "escaped:"),
    code('mem.add(\'<img src=x onerror="alert(1)">\', "bob", "planner", {"note": "<b>bold?</b>"})\n'
         'browser.clear_button.click()\nbrowser.refresh()\nbrowser.rows.value = browser.items[0].id\n'
         "print(browser.detail.value[browser.detail.value.index('<pre'):][:160])"),
]


def build(name: str, cells: list[nbformat.NotebookNode]) -> None:
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=False,
                            resources={"metadata": {"path": str(HERE)}})
    client.execute()
    for cell in nb.cells:
        # nbval ignores these outputs; the self-contained graph page is ~800 kB, so it is not committed.
        if cell.cell_type == "code" and "NBVAL_IGNORE_OUTPUT" in cell.source:
            cell.outputs = []
    nbformat.write(nb, HERE / name)
    print("wrote", HERE / name)


if __name__ == "__main__":
    wanted = sys.argv[1:]
    for name, cells in [("00_tour.ipynb", TOUR), ("01_namespaces.ipynb", NAMESPACES)]:
        if not wanted or name in wanted:
            build(name, cells)
