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
from memkit._demo import demo_items, load_demo

# A fresh copy of the seeded demo sample, so this notebook shows the same thing everywhere.
# For your own store: mem = memkit.open("sqlite:///data/memory.db") (what `make lab` loads).
store = Path(tempfile.mkdtemp(prefix="memkit-nb-")) / "demo.db"
mem = memkit.open(f"sqlite:///{store}")
load_demo(mem)
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
    md("## The dashboard\n\nThree tabs: **Namespaces** (a sortable table of memories, search, open one beside the "
       "table, delete), **Traces** (every workflow run: which failed, its timeline, a step's detail, two runs "
       "compared), **Graph** (a namespace or a workflow as a network). Every panel is also driven from Python: "
       "set a value, call a method, read the state."),
    code("from memkit.widgets import Dashboard\n\ndash = Dashboard(mem)\ndash"),
    md("## A search\n\nA new SQLite store embeds its memories with memkit's default model, so search is "
       "hybrid: BM25 keyword scores and vector similarity fused; the filter leaves the trace steps out; "
       "`score_details` says how each hit was found (which leg, each leg's rank and score)."),
    code('not_traces = {"type": {"$ne": "trace"}}\n'
         'hits = mem.search("TP53 BLAST homologs", user_id="alice", agent_id="bioinformatics", limit=3,\n'
         '                  filters=not_traces)\n'
         'for hit in hits:\n'
         '    print(f"{hit.score:6.2f}  {hit.content[:90]}")\n'
         'hits[0].score_details'),
    md("The same search from the panel: set the box and press the button (this is what your clicks do). The "
       "table draws each hit's score as a bar per leg; the list ends where the scores reach zero."),
    code('browser = dash.browser\nbrowser.namespace.value = ("alice", "bioinformatics")\n'
         'browser.query.value = "TP53 BLAST homologs"\nbrowser.filters.value = \'{"type": {"$ne": "trace"}}\'\n'
         'browser.search_button.click()\n'
         'print(browser.rows.caption)\n'
         'browser.rows.value = browser.items[0].id  # open the best hit beside the table\n'
         'print(browser.selected.content)'),
    md("## Traces\n\nEach workflow run is stored as one trace record per step. `memkit.frames.runs_frame` "
       "has one row per run; the **Traces** tab draws the same rows, a run's timeline and a step's detail."),
    code("from memkit.frames import runs_frame\n\n"
         "runs = runs_frame(mem)\n"
         'runs[runs.status == "failed"][["started_at", "duration_s", "steps", "failed_steps", "first_error"]]'),
    code('replay = dash.replay\nreplay.run = "variant-calling-alice-1/run-alice-1"  # what a click on its row does\n'
         'replay.step = 4                                    # ... and a click on its last bar\n'
         'print(replay.detail["title"], "->", replay.detail["error"])\nreplay'),
    md("## What did a step know?\n\nA trace says what a step did; a **recall** says what it knew. Every search "
       "a step makes inside `history.step(...)` is recorded: its query, and each memory it returned with rank, "
       "score and the text as it was then. The newest demo run, alice's literature review, failed at its second "
       "step: it asked for the BRCA2 zebrafish BLAST result and did not get it."),
    code('review = runs_frame(mem).iloc[0]\n'
         'print(review.name, "·", review.status, "·", review.recalls, "recalls ·", review.first_error)\n'
         'replay.run = review.name\nreplay.step = 1                                    # the failed step\n'
         'for r in replay.detail["recalls"]:\n'
         '    print(f\'{r["kind"]} "{r["query"]}"\')\n'
         '    for hit in r["hits"]:\n'
         '        print(f\'  {hit["rank"]}. {hit["text"]}\')'),
    md("The recall missed what it should have found: the BLAST result was stored only after the run. "
       "`replay_recall` runs the same search (query, namespace, mode, limit) against the store as it is today "
       "and says per memory what changed: the missing result comes back `new` at rank 1."),
    code("from memkit.frames import recalls_frame, replay_recall\n\n"
         'missed = recalls_frame(mem, workflow_id=review.workflow_id)\n'
         "missed = missed[missed.step_index == 1]\n"
         "today = replay_recall(mem, missed.recall_id.iloc[0])\n"
         'today[["change", "old_rank", "new_rank", "content"]]'),
    md("Which tools fail, and how? The pictures render in JupyterLab itself (Vega-Lite, nothing fetched)."),
    code("from memkit.charts import failure_heatmap\n\nfailure_heatmap(mem)"),
    md("## The graph\n\nA namespace: its memories and the genes, tools and topics they mention. Colour is the node "
       "type, captions are names; click a node for its properties, double-click to fetch its neighbours. The view "
       "is offline: vis-network ships inside memkit, nothing is fetched, and memory text is shown as text."),
    code('explorer = dash.explorer\nexplorer.namespace.value = ("alice", "bioinformatics")\n'
         "explorer.draw_button.click()\nprint(explorer.view.message)\n"
         "print(sorted({node.type for node in explorer.view.nodes}))"),
    code("explorer"),
    md("Next: `01_namespaces.ipynb` goes through the namespace browser in detail, `02_trace_audit.ipynb` "
       "audits the traces and `03_memory_graph.ipynb` explores the graph (also on a graph database)."),
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
    md("The switch above the table shows the namespace's memories (the default), its trace steps or its "
       "recorded searches. The table sorts by a click on a column, hides columns under *columns*, narrows the "
       "page with a filter box under each column, downloads the rows shown as CSV, shows the whole cell on "
       "hover, and opens a row beside it on a click (below it on a narrow cell). Enter in the search or filter "
       "box runs the search; a store call that takes longer than a moment shows *working…*.\n\n"
       "## Paging\n\nPages come from `get_page` (newest first); only one page is in memory."),
    code("print(browser.page_label.value)\nfor item in browser.items:\n    print(' ', item.content[:100])"),
    code("browser.next_button.click()\nprint(browser.page_label.value)\n"
         "print('newer page available:', not browser.prev_button.disabled)"),
    md("## Metadata filters\n\nA JSON object with equality or `$eq $ne $in $nin $gt $gte $lt $lte`. A mistake "
       "shows a clear message in place of the results (never the old rows under a new question)."),
    code('browser.filters.value = \'{"priority": "high"}\'\nbrowser.search_button.click()\n'
         "print(browser.page_label.value)\n"
         "print({item.metadata['priority'] for item in browser.items})"),
    code('browser.filters.value = \'{"priority": high}\'\nbrowser.search_button.click()\n'
         "print(browser.status.value)\nprint(\"rows shown:\", len(browser.rows.rows))"),
    code('browser.filters.value = \'{"gene": {"$in": ["TP53", "KRAS"]}}\'\nbrowser.search_button.click()\n'
         "print(browser.page_label.value, sorted({item.metadata['gene'] for item in browser.items}))"),
    md("## Search modes\n\nOnly the modes the store supports are offered: a store with an embedder (the "
       "default for a new SQLite store) has keyword, semantic and hybrid, preselecting hybrid; a keyword-only "
       "store (`?embedder=none`) has keyword search alone."),
    code('browser.filters.value = ""\nbrowser.query.value = "orthologues vertebrates"\n'
         "print(browser.mode.options)\nbrowser.search_button.click()\n"
         "for item in browser.items[:3]:\n    print(f'{item.score:5.2f}  {item.content[:90]}')"),
    md("## Traces read as steps\n\nA trace memory is stored as `[trace] workflow=… data={json}` so keyword search "
       "finds it; the table shows it as a step instead:"),
    code('steps = NamespaceBrowser(mem, page_size=4)\nsteps.namespace.value = ("alice", "bioinformatics")\n'
         'steps.kind.value = "traces"\n'
         'for row in steps.rows.rows:\n    print(row["text"])'),
    md("## Detail and delete\n\nPick a row to see its content, metadata and how it was found (a bar per search "
       "leg: its rank and score). Delete asks first."),
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

TRACE_AUDIT = [
    md("# Auditing traces\n\nEvery step an agent runs can be stored as a trace record (`ExecutionHistory`, "
       "`add_trace`). This notebook answers the questions a researcher asks of them, each once as a pandas "
       "table (`memkit.frames`) and once as a picture or a panel (`TraceReplay`, `memkit.charts`). The panel "
       "draws the same tables, so the two always agree."),
    code(SETUP),
    md("## Which runs failed, were slow, or retried?\n\n`runs_frame` has one row per workflow run: workflow, "
       "agent, user, run id, start, duration, steps, failed steps, retries, first error and status. It filters "
       "by status, agent, tool, date and duration."),
    code("from memkit.frames import runs_frame\n\n"
         "runs = runs_frame(mem)\n"
         "failed, retried = (runs.status == 'failed').sum(), (runs.retries > 0).sum()\n"
         "print(f\"{len(runs)} runs, {failed} failed, {retried} with retries\")\n"
         'runs[["status", "started_at", "duration_s", "steps", "failed_steps", "retries", "first_error"]].head(8)'),
    code('slow_blast = runs_frame(mem, tool="blast", min_duration=600)\n'
         'slow_blast[["status", "duration_s", "steps", "retries"]].sort_values("duration_s", ascending=False)'),
    md("The run list: click a column to sort, pick a status, agent or tool, type part of an id or an error; "
       "failed runs are red. Here it is filtered to the failed runs from Python, exactly as the menus do it."),
    code("from memkit.widgets import TraceReplay\n\n"
         "audit = TraceReplay(mem)\n"
         'audit.filters = {"status": "failed"}\n'
         "audit"),
    md("## What happened in this run?\n\nClick a run: its timeline has one bar per step on a time axis, coloured "
       "by status; striped bars were retried (↻n), a dotted line is time nobody worked. Clicking a bar opens "
       "the step beside it."),
    code("one = TraceReplay(mem)\n"
         'one.run = "variant-calling-alice-1/run-alice-1"\n'
         "one.step = 4\n"
         "one"),
    md("## What exactly did this step do?\n\nThe detail has the tool, status, duration, retries and the "
       "errors of earlier attempts, parameters and result as a tree (long values folded, a copy button), the "
       "full error, and on request the memories the step wrote. The same from Python:"),
    code('detail = one.detail\nprint(detail["title"], "·", detail["status"])\nprint("error:", detail["error"])\n'
         'print("parameters:", detail["parameters"])\n'
         "from memkit.frames import run_steps\n\n"
         'run_steps(mem, "variant-calling-alice-1/run-alice-1")'
         '[["step_index", "step_name", "tool", "status", "duration_s", "retry_count", "error"]]'),
    md("## What changed between two runs?\n\n`compare_runs` aligns two runs' steps by index and says what "
       "differs: status, tool, error, parameters, result (durations are shown, but do not count as a change)."),
    code("from memkit.frames import compare_runs\n\n"
         'diff = compare_runs(mem, "variant-calling-alice-1/run-alice-1", "variant-calling-bob-1/run-bob-1")\n'
         'diff[["step_index", "step_name_a", "status_a", "status_b", "duration_change_s", "changes", "change"]]'),
    code("one.compare_with = \"variant-calling-bob-1/run-bob-1\"  # the 'compare with' menu under the timeline\n"
         "print(one.comparison[\"caption\"])"),
    md("## Which tools fail, how, and since when?\n\nPictures of every step in the store. They are Vega-Lite "
       "specifications drawn by JupyterLab's own renderer (offline); `chart.data` is the table behind each."),
    code("from memkit.charts import duration_chart, failure_heatmap, success_rate_chart\n\n"
         "duration_chart(mem)"),
    code("failure_heatmap(mem)"),
    code("rate = success_rate_chart(mem, freq=\"h\")\nrate"),
    code("from memkit.frames import tool_stats\n\n"
         "tool_stats(mem).sort_values(\"success_rate\").round(2)"),
    md("## Export\n\nThe open run's steps go to CSV (here into a temporary directory); any frame above does "
       "too with pandas."),
    code('import pandas as pd\n\n'
         'out = Path(tempfile.mkdtemp(prefix="memkit-csv-")) / "variant-calling-alice-1.csv"\n'
         "one.export(str(out))\n"
         'back = pd.read_csv(out, index_col="step_id")\n'
         "print(len(back), \"rows:\", back.step_name.tolist())"),
    md("## What did each step know?\n\nA trace says what a step did; a **recall** says what it knew. Every "
       "search a step makes inside `history.step(...)` is recorded with its query, mode, and each memory it "
       "returned: rank, score, the search legs that found it, and the text as it was then. Here a short "
       "literature-review run: the first step looks up earlier results, the second reads background and "
       "writes a plan (its metadata names the workflow and step), the third only writes a summary."),
    code("from memkit.traces import ExecutionHistory\n\n"
         'not_traces = {"type": {"$ne": "trace"}}  # search the notes, not the trace records\n'
         "# The steps are traced under the default user, \"system\"; they search and write alice's memories.\n"
         'history = ExecutionHistory(memory_provider=mem, workflow_id="literature-review",\n'
         '                           agent_id="bioinformatics", run_id="review-1")\n'
         'with history.step("recall_prior_work", tool="memory") as step:\n'
         '    prior = mem.search("apoptosis co-expression module", "alice", "bioinformatics", limit=3,\n'
         "                       filters=not_traces)\n"
         '    step.result = {"found": len(prior)}\n'
         'with history.step("plan_experiment", tool="llm") as step:\n'
         '    background = mem.search("BRCA1 coverage", "alice", "bioinformatics", limit=3, filters=not_traces)\n'
         '    mem.add("Plan: knock down CDKN2A and EGFR together, then measure apoptosis", "alice",\n'
         '            "bioinformatics", {"workflow_id": "literature-review", "step_index": 1})\n'
         '    step.result = {"plan": "double knockdown"}\n'
         'with history.step("write_summary", tool="llm") as step:\n'
         '    step.result = {"words": 180}\n'
         "history.flush()"),
    md("`recalls_frame` has one row per (recall, memory returned); `legs` says which search found it "
       "(keyword, semantic or both) and each leg's rank is beside it."),
    code("from memkit.frames import recalls_frame\n\n"
         'recalled = recalls_frame(mem, workflow_id="literature-review")\n'
         'recalled[["step_index", "step_name", "query", "rank", "score", "legs", "keyword_rank", "semantic_rank",\n'
         '          "content"]].round(3)'),
    md("What the run wrote, and how many searches each step made (`run_steps` counts them, as `runs_frame` "
       "does per run):"),
    code('steps = run_steps(mem, "literature-review/review-1")\n'
         'print(steps[["step_index", "step_name", "tool", "recalls", "recalled"]].to_string(index=False))\n'
         'wrote = mem.get_all("alice", "bioinformatics", filters={"workflow_id": "literature-review", '
         '"type": {"$ne": "trace"}})\n'
         'print([(m.metadata["step_index"], m.content) for m in wrote])'),
    md("## Would it recall the same today?\n\nMemories change after a run: new results arrive, old ones are "
       "deleted, the store is re-embedded. `replay_recall` runs a recall again against the store as it is now "
       "and says, per memory, what changed: `new`, `gone` (and whether it was `deleted`), `up`, `down`, "
       "`same`. Here a new result is added and the step's second memory deleted."),
    code('first = recalled[recalled.step_index == 0]\n'
         'mem.add("GO enrichment of the TP53 co-expression module points to apoptosis (FDR 0.001)", "alice",\n'
         '        "bioinformatics", {"gene": "TP53", "topic": "apoptosis"})\n'
         'mem.delete(first.memory_id.iloc[1], user_id="alice", agent_id="bioinformatics")\n\n'
         "from memkit.frames import replay_recall\n\n"
         "today = replay_recall(mem, first.recall_id.iloc[0])\n"
         'today[["change", "old_rank", "new_rank", "deleted", "content"]]'),
    md("The panel shows the same per step: **recalled N memories** with each search's query, mode, and its "
       "hits best first (rank, score, which leg found it, the text as recalled; a memory deleted since is "
       "marked *deleted*), then **wrote M memories** on request. A click on a memory opens it beside the "
       "list, or its snapshot if it is gone. The run list has a *recalls* column, the timeline marks the "
       "steps that searched, and a workflow's graph (`GraphExplorer`, workflow scope) draws each recall as a "
       "dashed purple edge from the step to the memory."),
    code("review = TraceReplay(mem)\n"
         'review.run = "literature-review/review-1"\n'
         "review.step = 0\n"
         "review.find_memories()\n"
         "review"),
    code('d = review.detail\n'
         'print(d["title"], "· recalled", d["recalled"], "memories")\n'
         'for r in d["recalls"]:\n'
         '    print(f\'{r["kind"]} "{r["query"]}" ({r["mode"]})\')\n'
         '    for hit in r["hits"]:\n'
         '        print(f\'  {hit["rank"]}. {hit["text"][:70]}\' + ("  [deleted since]" if hit["deleted"] else ""))'),
]

GRAPH_SETUP = """import os

from memkit.testing import FalkorDBServer

# With MEMKIT_NEO4J_URI set, this part runs on that Neo4j (wiped first, like the test suite does);
# otherwise on a FalkorDB server started here on a free 127.0.0.1 port, without persistence.
neo4j_uri = os.environ.get("MEMKIT_NEO4J_URI")
server = None if neo4j_uri else FalkorDBServer().start()
graph_url = neo4j_uri or server.url("notebook")
gmem = memkit.open(graph_url)
gmem.reset()
gmem.add_many(demo_items())
gstats = gmem.stats()
print(f"{gstats.memories} memories ({gstats.traces} trace steps) in {gstats.namespaces} namespaces")"""

MEMORY_GRAPH = [
    md("# The memory graph\n\n`memkit.graph.memory_graph` gives the typed nodes and edges of any store: "
       "memories, their namespace, the genes / tools / topics they mention, and workflows with their steps "
       "in order. Graph databases (FalkorDB, Neo4j) return what they store; SQLite and the in-memory store "
       "build the same graph from their rows."),
    code(SETUP),
    md("## A namespace on the embedded store"),
    code("from memkit.graph import memory_graph\n\n"
         'ns_graph = memory_graph(mem, user_id="alice", agent_id="bioinformatics")\n'
         "print(len(ns_graph.nodes), \"nodes,\", len(ns_graph.edges), \"edges\")\n"
         "print(dict(sorted(ns_graph.node_types().items())))\n"
         "print(dict(sorted(ns_graph.edge_types().items())))"),
    code("nodes = ns_graph.nodes_frame()\nprint(list(nodes.columns))\n"
         'nodes[nodes.type == "Entity"].sort_values(["kind", "name"])[["kind", "name"]].reset_index(drop=True)'),
    code("edges = ns_graph.edges_frame()\nprint(list(edges.columns))\n"
         'edges.groupby("type").size().rename("edges")'),
    md("## A workflow\n\nOne run: the workflow, its trace records, one step per trace linked in order, and the "
       "tools the steps used."),
    code('wf_graph = memory_graph(mem, user_id="alice", agent_id="bioinformatics",\n'
         '                        workflow_id="variant-calling-alice-1")\n'
         "print(dict(sorted(wf_graph.node_types().items())))\n"
         "print(dict(sorted(wf_graph.edge_types().items())))\n"
         "wf_nodes = wf_graph.nodes_frame()\n"
         'sorted(wf_nodes.loc[wf_nodes.type == "Tool", "name"])'),
    md("## Explore it\n\n`GraphExplorer` draws the graph as a live widget (anywidget; its JavaScript and "
       "vis-network ship inside memkit, nothing is fetched). Every node is captioned by what it is (`TP53`, a "
       "tool, `3 · bwa` for a step, a memory's first words; the id only in the properties panel), coloured by its "
       "label with a colour-blind-safe palette (failed steps in vermillion), and:\n\n"
       "- **click** a node: its properties in the side panel, and `explorer.selected` in Python;\n"
       "- **double-click**: fetch its neighbours from the store and add them;\n"
       "- **search** box: type part of a caption and press Enter to focus that node;\n"
       "- **legend**: click a type to hide or show it (its count follows); **Fit**, **Fit selection**, "
       "**Reset**, and **PNG** (the current view as an image);\n"
       "- **drag** a node: it stays where you put it;\n"
       "- **size** and **colour** rules: size by memories in a group, connections or times recalled; colour by "
       "type, namespace or entity kind.\n\n"
       "Captions are drawn at 12 px on screen at any zoom: zoomed out, only the most connected nodes are named, "
       "the rest appear as you zoom in. Over the node cap (`max_nodes`, 300) the view is grouped: see below."),
    code("from memkit.widgets import GraphExplorer\n\n"
         "explorer = GraphExplorer(mem)\n"
         'explorer.namespace.value = ("alice", "bioinformatics")\n'
         "explorer.draw()\n"
         "explorer"),
    code("data = explorer.canvas.data\n"
         'print(data["message"])\n'
         'print({item["label"]: item["color"] for item in data["legend"]})\n'
         'print(sorted(n["label"] for n in data["nodes"] if n["type"] == "Entity")[:8])'),
    md("## A large store: groups\n\nOver the node cap, memories are folded into the entities that mention them "
       "(and steps into their runs), each group with its count; a click on a group opens its newest members. "
       "A memory's panel lists the runs whose steps recalled it, and *open these runs* draws them, each as its "
       "ordered steps with what they recalled. Here the demo namespace with a small cap, and the same clicks "
       "made from Python:"),
    code("grouped = GraphExplorer(mem, max_nodes=40, size_by=\"count\")\n"
         'grouped.namespace.value = ("alice", "bioinformatics")\n'
         "grouped.draw()\n"
         'print(grouped.canvas.data["message"])\n'
         'top = max((n for n in grouped.view.nodes if n.type == "Entity"),\n'
         '          key=lambda n: (grouped.view.counts[n.id], n.properties["name"]))\n'
         "opened = grouped.canvas.open_group(top.id)\n"
         'print(f"{top.properties[\'name\']} holds {grouped.view.counts[top.id]} memories; opened:", len(opened))\n'
         "grouped"),
    code('overview = ns_graph.to_networkx(group="entity", max_nodes=40)\n'
         'print(sorted((d["memories"], d["name"]) for _, d in overview.nodes(data=True)\n'
         '             if d["type"] == "Entity")[-5:])'),
    md("Clicking a node in the drawing sets `explorer.selected`; here the same selection made from Python. "
       "`memkit.graph.neighbourhood` is what a double-click calls: a node and what it connects to, read from the "
       "store (a node id works too), so you can walk out from one gene (here BRCA2)."),
    code("from memkit.graph import neighbourhood\n\n"
         'brca2 = next(n for n in ns_graph.nodes if n.type == "Entity" and n.properties["name"] == "BRCA2")\n'
         "explorer.canvas.selected_id = brca2.id\n"
         "chosen = explorer.selected\n"
         "print(chosen.type, chosen.properties[\"kind\"], chosen.properties[\"name\"])\n"
         "around = neighbourhood(mem, brca2, depth=1, limit=50)\n"
         "print(dict(sorted(around.node_types().items())))\n"
         'for n in sorted((n for n in around.nodes if n.type == "Memory"), key=lambda n: n.properties["content"]):\n'
         '    print(" -", n.properties["content"][:70])'),
    md("## A workflow, left to right\n\nEach run is a row: its steps in order along `NEXT`, each step's memory "
       "above it, the tools in a lane below, failed steps in vermillion."),
    code("flow = GraphExplorer(mem)\n"
         'flow.scope.value = "workflow"\n'
         'flow.workflow.value = ("alice", "bioinformatics", "variant-calling-alice-1")\n'
         "flow.draw()\n"
         "flow"),
    code('steps = sorted((n for n in flow.canvas.data["nodes"] if n["type"] == "Step"),\n'
         '               key=lambda n: (n["y"], n["x"]))\n'
         'print(flow.canvas.data["layout"])\n'
         'print([(n["label"], "failed" if n["failed"] else "ok") for n in steps])'),
    md("## Export\n\n`to_html` writes the same readable page as `memkit graph --html` (offline, search, legend "
       "and properties work in the file); `to_pyvis` gives a `pyvis.network.Network` to customise."),
    code('page = Path(tempfile.mkdtemp(prefix="memkit-graph-")) / "alice.html"\n'
         "html = ns_graph.to_html(str(page), title=\"namespace alice / bioinformatics\")\n"
         'print(page.name, "fetches nothing:", "https://cdn" not in html and "src=\\"http" not in html)\n'
         "net = wf_graph.to_pyvis()\n"
         "print(type(net).__name__, len(net.nodes), \"nodes\", len(net.edges), \"edges\")"),
    md("## The same on a graph database\n\nThe FalkorDB adapter stores the graph natively. Load the same demo "
       "sample and ask the same questions: the answers match the embedded store."),
    code(GRAPH_SETUP),
    code('g_ns = memory_graph(gmem, user_id="alice", agent_id="bioinformatics")\n'
         "print(len(g_ns.nodes), \"nodes,\", len(g_ns.edges), \"edges\")\n"
         "print(\"same node types:\", g_ns.node_types() == ns_graph.node_types())\n"
         "print(\"same edge types:\", g_ns.edge_types() == ns_graph.edge_types())\n"
         "print(\"same nodes:\", {(n.id, n.type) for n in g_ns.nodes} == {(n.id, n.type) for n in ns_graph.nodes})\n"
         "print(\"same edges:\", {(e.type, e.source, e.target) for e in g_ns.edges}\n"
         "      == {(e.type, e.source, e.target) for e in ns_graph.edges})"),
    code('g_wf = memory_graph(gmem, user_id="alice", agent_id="bioinformatics",\n'
         '                    workflow_id="variant-calling-alice-1")\n'
         "print(dict(sorted(g_wf.node_types().items())))\n"
         "print(\"same as embedded:\", g_wf.node_types() == wf_graph.node_types()\n"
         "      and g_wf.edge_types() == wf_graph.edge_types())"),
    code("g_explorer = GraphExplorer(gmem)\n"
         'g_explorer.namespace.value = ("alice", "bioinformatics")\n'
         "g_explorer.draw()\n"
         'print(g_explorer.canvas.data["message"])\n'
         "g_around = neighbourhood(gmem, brca2.id)  # the graph database walks its own edges\n"
         "print(\"same neighbourhood of BRCA2:\", {n.id for n in g_around.nodes} == {n.id for n in around.nodes})\n"
         "g_explorer"),
    md("Close the store and stop the server this notebook started."),
    code("gmem.close()\nif server is not None:\n    server.stop()\n"
         "print(\"graph store closed\")"),
    md("## The same on Neo4j\n\nA real Neo4j 5.26 LTS started here (embedded, Bolt on a free 127.0.0.1 port, "
       "data in a temporary folder; `make neo4j` builds it, Java 17+). Same demo, same graph, same questions."),
    code("from memkit.testing import Neo4jServer\n\n"
         "neo4j_server = Neo4jServer().start()\n"
         "print(\"Neo4j\", neo4j_server.server_version, neo4j_server.edition)\n"
         "nmem = memkit.open(neo4j_server.url)\n"
         "nmem.add_many(demo_items())\n"
         'n_ns = memory_graph(nmem, user_id="alice", agent_id="bioinformatics")\n'
         "print(len(n_ns.nodes), \"nodes,\", len(n_ns.edges), \"edges\")\n"
         "print(\"same nodes as embedded:\",\n"
         "      {(n.id, n.type) for n in n_ns.nodes} == {(n.id, n.type) for n in ns_graph.nodes})\n"
         "print(\"same edges as embedded:\", {(e.type, e.source, e.target) for e in n_ns.edges}\n"
         "      == {(e.type, e.source, e.target) for e in ns_graph.edges})"),
    code("n_explorer = GraphExplorer(nmem)\n"
         'n_explorer.namespace.value = ("alice", "bioinformatics")\n'
         "n_explorer.draw()\n"
         'print(n_explorer.canvas.data["message"])\n'
         "n_around = neighbourhood(nmem, brca2.id)\n"
         "print(\"same neighbourhood of BRCA2:\", {n.id for n in n_around.nodes} == {n.id for n in around.nodes})\n"
         "n_explorer"),
    code("nmem.close()\nneo4j_server.stop()\nprint(\"Neo4j stopped\")"),
]


LANGGRAPH = [
    md("# A LangGraph agent with memkit memory, and its trace as OpenTelemetry\n\n"
       "`MemkitStore` is a LangGraph store: a graph compiled with it keeps its long-term memory in a memkit "
       "store, inside one memkit namespace. Its searches are recorded as recalls, so the audit views show what "
       "the agent knew; `memkit.otel` exports the run as OTLP spans (OTel GenAI conventions) and imports "
       "spans from other frameworks. Needs `pip install 'memkit[langgraph,otel]'`."),
    code("import tempfile\nimport warnings\nfrom pathlib import Path\nfrom typing import TypedDict\n\n"
         "# LangChain announces a future default when LangGraph is imported; it does not concern this notebook.\n"
         "with warnings.catch_warnings(record=True):\n"
         "    from langgraph.graph import END, START, StateGraph\n    from langgraph.store.base import BaseStore\n\n"
         "import memkit\nfrom memkit.langgraph import MemkitStore\n\n"
         "folder = Path(tempfile.mkdtemp(prefix=\"memkit-nb-\"))\n"
         "mem = memkit.open(f\"sqlite:///{folder / 'agent.db'}\")\n"
         "store = MemkitStore(mem, user_id=\"alice\", agent_id=\"lab-assistant\", workflow_id=\"qa-graph\")\n"
         "store"),
    md("## The agent\n\nTwo nodes: `remember` writes what the user said into the store, `answer` searches it. "
       "LangGraph hands each node the store; nothing in the nodes knows about memkit."),
    code("class State(TypedDict):\n    said: str\n    question: str\n    answer: str\n\n\n"
         "def remember(state: State, *, store: BaseStore) -> dict:\n"
         "    if state[\"said\"]:\n"
         "        key = f\"fact-{len(store.search(('facts',), limit=100))}\"\n"
         "        store.put((\"facts\",), key, {\"text\": state[\"said\"]})\n"
         "    return {}\n\n\n"
         "def answer(state: State, *, store: BaseStore) -> dict:\n"
         "    hits = store.search((\"facts\",), query=state[\"question\"], limit=1)\n"
         "    return {\"answer\": hits[0].value[\"text\"] if hits else \"I don't know\"}\n\n\n"
         "builder = StateGraph(State)\nbuilder.add_node(\"remember\", remember)\nbuilder.add_node(\"answer\", answer)\n"
         "builder.add_edge(START, \"remember\")\nbuilder.add_edge(\"remember\", \"answer\")\n"
         "builder.add_edge(\"answer\", END)\ngraph = builder.compile(store=store)\n\n"
         "for said in [\"My sample S7 carries a TP53 mutation\", \"The KRAS assay failed twice\", \"\"]:\n"
         "    out = graph.invoke({\"said\": said, \"question\": \"which mutation does S7 carry?\", \"answer\": \"\"})\n"
         "print(out[\"answer\"])"),
    md("## What memkit sees\n\nThe items are memkit memories in the namespace alice / lab-assistant (NamespaceBrowser "
       "lists them there), and each `store.search` with a query is a recall: the query, and what came back at "
       "which rank."),
    code("for item in mem.get_all(\"alice\", \"lab-assistant\", 10, {\"type\": \"langgraph_item\"}):\n"
         "    print(item.metadata[\"lg_ns\"], item.metadata[\"lg_key\"], item.metadata[\"lg_value\"])"),
    code("from memkit.frames import recalls_frame\n\n"
         "recalls_frame(mem, \"qa-graph\")[[\"step_name\", \"query\", \"rank\", \"content\"]]"),
    md("## The run as OpenTelemetry spans\n\nA memkit step (here one that uses the store) becomes a span; its "
       "searches become `search_memory` child spans carrying the retrieved documents. The file opens in "
       "Phoenix or any OTLP viewer, and `import_otlp` reads it (or any OTLP / OpenInference span file) back "
       "as runs."),
    code("from memkit.otel import export_otlp, import_otlp\nfrom memkit.traces import ExecutionHistory\n\n"
         "history = ExecutionHistory(memory_provider=mem, workflow_id=\"report\", agent_id=\"lab-assistant\",\n"
         "                           user_id=\"alice\", run_id=\"r1\")\n"
         "with history.step(\"collect\", tool=\"store\") as step:\n"
         "    hits = store.search((\"facts\",), query=\"TP53 KRAS\")\n"
         "    step.result = {\"facts\": [h.value[\"text\"] for h in hits]}\n\n"
         "request = export_otlp(mem, folder / \"runs.otlp.json\", workflow_id=\"report\")\n"
         "for span in request[\"resourceSpans\"][0][\"scopeSpans\"][0][\"spans\"]:\n"
         "    attributes = {a[\"key\"]: a[\"value\"] for a in span[\"attributes\"]}\n"
         "    kind = attributes[\"gen_ai.operation.name\"][\"stringValue\"]\n"
         "    print(f\"{span['name']:<30} {kind}\")"),
    code("with memkit.open(f\"sqlite:///{folder / 'copy.db'}\") as copy:\n"
         "    print(import_otlp(copy, folder / \"runs.otlp.json\"))\n"
         "    from memkit.frames import traces_frame\n"
         "    columns = [\"workflow_id\", \"run_id\", \"step_name\", \"tool\", \"status\"]\n"
         "    print(traces_frame(copy)[columns].to_string())"),
    code("mem.close()"),
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
    notebooks = [("00_tour.ipynb", TOUR), ("01_namespaces.ipynb", NAMESPACES),
                 ("02_trace_audit.ipynb", TRACE_AUDIT), ("03_memory_graph.ipynb", MEMORY_GRAPH),
                 ("04_langgraph_otel.ipynb", LANGGRAPH)]
    for name, cells in notebooks:
        if not wanted or name in wanted:
            build(name, cells)
