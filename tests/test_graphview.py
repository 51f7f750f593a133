"""The graph view of a real store: readable captions, colours by label, workflows in order, honest cuts.

Built from memory_graph of real stores (SQLite file, FalkorDB server): memories with genes
and topics, two runs of one workflow, one of them with a failed step.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit._core._errors import InvalidInputError
from memkit.adapters import FalkorDBAdapter, InMemoryAdapter, Neo4jAdapter, SQLiteAdapter
from memkit.graph import GraphNode, MemoryGraph, amemory_graph, aneighbourhood, memory_graph, neighbourhood
from memkit.graph._page import page_html, payload
from memkit.graph._style import FAILED_COLOUR, LABEL_STYLE
from memkit.graph._view import select

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HOSTILE = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>\u202e'
# A resource URL is one the browser would fetch: src/href attributes, CSS url(), @import.
RESOURCE = re.compile(r"""(?:\bsrc\s*=|\bhref\s*=|url\(|@import)\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)
NEO4J_URI = os.environ.get("MEMKIT_NEO4J_URI")
# With a Neo4j configured, the graph-database tests also run there (it wipes that database first).
GRAPH_DBS = ["falkordb", *(["neo4j"] if NEO4J_URI else [])]
STEPS = [("fetch_reads", "sra-tools"), ("quality_check", "fastqc"), ("align_reads", "bwa"),
         ("call_variants", "gatk")]


async def _graph_db(kind: str, request: pytest.FixtureRequest) -> Any:
    if kind == "neo4j":
        assert NEO4J_URI
        provider = Neo4jAdapter(NEO4J_URI)
        await provider.reset()
        return provider
    server = request.getfixturevalue("falkordb_server")
    return FalkorDBAdapter.from_url(server.url(f"view-{uuid.uuid4().hex[:8]}"))


@pytest.fixture(params=["sqlite", *GRAPH_DBS])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "sqlite":
        provider: Any = SQLiteAdapter(tmp_path / "view.db")
    elif request.param == "neo4j":
        provider = await _graph_db("neo4j", request)
    else:
        server = request.getfixturevalue("falkordb_server")
        provider = FalkorDBAdapter.from_url(server.url(f"view-{uuid.uuid4().hex[:8]}"))
    await fill(provider)
    yield provider
    await provider.aclose()


async def fill(mem: Any) -> None:
    await mem.add("TP53 knockdown raises apoptosis in HeLa cells", "alice", "bio",
                  {"gene": "TP53", "topic": "apoptosis"})
    await mem.add("BRCA1 and TP53 interact at DNA damage sites", "alice", "bio",
                  {"gene": ["BRCA1", "TP53"], "topic": "DNA repair"})
    await mem.add(HOSTILE, "alice", "bio", {"gene": "EGFR", "topic": HOSTILE})
    # Two runs; steps arrive out of order; the second run fails at alignment.
    for run, failed_at in (("run-1", None), ("run-2", 2)):
        for index in (3, 0, 2, 1):
            name, tool = STEPS[index]
            status = "failed" if index == failed_at else "success"
            await mem.add_trace("bio", "variant-calling", {
                "step_index": index, "step_name": name, "tool": tool, "status": status, "run_id": run,
                "duration": 2.5, "error": "Connection reset by peer" if status == "failed" else None,
            }, user_id="alice")


async def test_captions_colours_and_sizes_follow_the_schema_labels(store: Any) -> None:
    graph = await amemory_graph(store, user_id="alice", agent_id="bio")
    nodes = payload(select(graph, 500))["nodes"]
    labels = {n["type"] for n in nodes}
    assert labels == {"Namespace", "Memory", "Entity", "Workflow", "Trace", "Step", "Tool"}
    colour = {t: {n["color"]["background"] for n in nodes if n["type"] == t and not n["failed"]} for t in labels}
    assert all(len(c) == 1 for c in colour.values())  # one colour per label
    assert len({c.pop() for c in colour.values()}) == len(labels)  # and no two labels share one
    failed = [n for n in nodes if n["failed"]]
    assert [n["label"] for n in failed] == ["2 · bwa"]
    assert failed[0]["color"]["background"] == FAILED_COLOUR not in {s["color"] for s in LABEL_STYLE.values()}
    for n in nodes:
        assert n["label"] and not UUID.search(n["label"]), n  # captions are names, never ids
        assert not UUID.search(n["title"].splitlines()[0])
        assert ["id", n["id"]] in n["props"]  # the id is in the properties panel
    captions = {(n["type"], n["label"]) for n in nodes}
    assert {("Entity", "TP53"), ("Entity", "apoptosis"), ("Tool", "bwa"), ("Step", "0 · sra-tools"),
            ("Workflow", "variant-calling"), ("Trace", "run-2"), ("Namespace", "alice / bio")} <= captions
    # a caption cut short ends after a whole word; the tooltip holds the whole text
    tp53 = next(n for n in nodes if n["label"].startswith("TP53 knockdown"))
    assert tp53["label"] == "TP53 knockdown raises…" and "TP53 knockdown raises apoptosis in HeLa" in tp53["title"]
    # a step's memory is named by its step (its tool is the step's own caption), whole
    assert {n["label"] for n in nodes if n["type"] == "Memory" and n["label"].startswith("step ")} == {
        "step 0 · fetch_reads", "step 1 · quality_check", "step 2 · align_reads", "step 3 · call_variants"}
    # Tooltips are formatted text: a step reads as a step, never as escaped JSON.
    step_tip = next(n["title"] for n in failed)
    assert "step 2 · bwa · align_reads · failed · 2.5 s" in step_tip and "Connection reset" in step_tip
    assert "{" not in step_tip
    tp53 = next(n for n in nodes if n["label"] == "TP53")
    assert tp53["size"] > next(n for n in nodes if n["label"] == "BRCA1")["size"]  # hubs grow with use


async def test_a_workflow_reads_left_to_right_along_next(store: Any) -> None:
    graph = await amemory_graph(store, user_id="alice", agent_id="bio", workflow_id="variant-calling")
    view = select(graph)
    assert view.layout == "workflow"
    data = payload(view)
    assert data["physics"] is False
    at = {n["id"]: (n["x"], n["y"]) for n in data["nodes"]}
    steps = [n for n in graph.nodes if n.type == "Step"]
    nexts = [e for e in graph.edges if e.type == "NEXT"]
    assert len(nexts) == 6
    for e in nexts:  # every NEXT points right, within its run's row
        assert at[e.target][0] > at[e.source][0] and at[e.target][1] == at[e.source][1]
    rows = {at[s.id][1] for s in steps}
    assert len(rows) == 2
    for row in rows:
        ordered = sorted((s for s in steps if at[s.id][1] == row), key=lambda s: at[s.id][0])
        assert [s.properties["order"] for s in ordered] == [0, 1, 2, 3]
    for e in graph.edges:  # tools in a lane below the runs, each step's memory right above it
        if e.type == "USES_TOOL":
            assert at[e.target][1] > max(rows)
        if e.type == "RECORDED_AS":
            assert at[e.target][1] < at[e.source][1] and at[e.target][0] == at[e.source][0]


def test_over_the_cap_memories_are_sampled_not_cut_for_hubs(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'big.db'}") as mem:
        genes = [f"G{i}" for i in range(40)]
        items = [{"content": f"note {i} on {genes[i % 40]}", "user_id": "u", "agent_id": "a",
                  "metadata": {"gene": genes[i % 40], "topic": f"t{i % 7}"}} for i in range(1500)]
        items += [{"content": f"[trace] {i}", "user_id": "u", "agent_id": "a",
                   "metadata": {"type": "trace", "workflow_id": f"wf-{i % 5}", "tool": "bwa",
                                "step_index": i % 9, "status": "success", "run_id": f"r{i % 30}"}}
                  for i in range(300)]
        mem.add_many(items)
        graph = memory_graph(mem, user_id="u", agent_id="a", limit=2000)
    view = select(graph, 150)
    shown = view.shown
    assert len(view.nodes) == 150
    assert shown["Memory"] >= 40  # memories are never all cut away
    kinds = {n.properties["type"] for n in view.nodes if n.type == "Memory"}
    assert kinds == {None, "trace"}  # every kind of memory kept
    times = sorted(n.properties["created_us"] for n in graph.nodes if n.type == "Memory")
    kept = sorted(n.properties["created_us"] for n in view.nodes if n.type == "Memory")
    assert kept[0] <= times[len(times) // 10] and kept[-1] >= times[-len(times) // 10]  # spread over time
    linked = {e.source for e in view.edges} | {e.target for e in view.edges}
    assert all(n.id in linked for n in view.nodes if n.type == "Entity")  # no ring of isolated dots
    left = view.total["Memory"] - shown["Memory"]
    assert f"{left:,} of {view.total['Memory']:,} memories" in view.message and left > 1000
    for advice in ("draw one workflow", "double-click a node to expand", "raise max nodes"):
        assert advice in view.message
    with pytest.raises(InvalidInputError):
        select(graph, 0)


def test_the_page_is_offline_and_script_safe(tmp_path: Path) -> None:
    mem = memkit.open("memory://")
    mem.add(HOSTILE, "u", "a", {"gene": HOSTILE})
    graph = memory_graph(mem)
    page = graph.to_html(str(tmp_path / "g.html"), title=HOSTILE)
    assert (tmp_path / "g.html").read_text(encoding="utf-8") == page
    assert not RESOURCE.search(page)
    assert "<img src=x" not in page and "window.__pwned=2</script>" not in page
    data = page[page.index('id="memkit-graph-data">') + 23 : page.index("</script>")]
    decoded = json.loads(data)
    memory = next(n for n in decoded["nodes"] if n["type"] == "Memory")
    assert memory["label"].startswith('<img src=x')  # captions show the text as text
    assert "\u202e" not in memory["label"]  # bidi overrides are shown escaped, not obeyed
    assert ["content", HOSTILE.replace("\u202e", "\\u202e")] in memory["props"]


def test_to_pyvis_is_the_same_view_as_a_pyvis_network() -> None:
    from pyvis.network import Network

    mem = memkit.open("memory://")
    mem.add("TP53 knockdown", "u", "a", {"gene": "TP53"})
    net = memory_graph(mem).to_pyvis()
    assert isinstance(net, Network)
    by_label = {n["label"]: n for n in net.nodes}
    assert by_label["TP53"]["color"]["background"] == LABEL_STYLE["Entity"]["color"]
    assert by_label["TP53 knockdown"]["title"].startswith("Memory · u / a")
    assert len(net.edges) == 2


@pytest.mark.parametrize("kind", ["memory", "sqlite", *GRAPH_DBS])
async def test_neighbourhood_walks_out_from_a_gene(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if kind == "memory":
        provider: Any = InMemoryAdapter()
    elif kind == "sqlite":
        provider = SQLiteAdapter(tmp_path / "n.db")
    else:
        provider = await _graph_db(kind, request)
    try:
        await fill(provider)
        await provider.add("TP53 elsewhere", "bob", "bio", {"gene": "TP53"})
        graph = await amemory_graph(provider, user_id="alice", agent_id="bio")
        tp53 = next(n for n in graph.nodes if n.type == "Entity" and n.properties["name"] == "TP53")
        for start in (tp53, tp53.id):  # a node or just its id
            around = await aneighbourhood(provider, start)
            memories = sorted(n.properties["content"] for n in around.nodes if n.type == "Memory")
            assert memories == ["BRCA1 and TP53 interact at DNA damage sites",
                                "TP53 knockdown raises apoptosis in HeLa cells"]  # never bob's
            assert {e.type for e in around.edges} == {"MENTIONS"}
        two = await aneighbourhood(provider, tp53, depth=2)
        assert {"Entity", "Memory", "Namespace"} <= set(two.node_types()) and len(two.nodes) > len(around.nodes)
        step = next(n for n in graph.nodes if n.type == "Step" and n.properties["order"] == 1
                    and n.properties["run_id"] == "run-2")
        near = await aneighbourhood(provider, step)
        assert sorted(n.properties.get("order") for n in near.nodes if n.type == "Step") == [0, 1, 2]
        assert {"Trace", "Tool", "Memory"} <= set(near.node_types())
        memory = next(n for n in graph.nodes if n.type == "Memory" and n.properties["content"].startswith("BRCA1"))
        assert {n.properties.get("name") for n in (await aneighbourhood(provider, memory.id)).nodes
                if n.type == "Entity"} == {"BRCA1", "TP53", "DNA repair"}
        assert (await aneighbourhood(provider, str(uuid.uuid4()))).nodes == []
        assert len((await aneighbourhood(provider, tp53, limit=1)).nodes) == 2
        for bad in ({"depth": 0}, {"depth": 9}, {"limit": 0}, {"limit": True}):
            with pytest.raises(InvalidInputError):
                await aneighbourhood(provider, tp53, **bad)
        with pytest.raises(InvalidInputError):
            await aneighbourhood(provider, GraphNode("x", "Gene"))
    finally:
        await provider.aclose()


def test_the_sync_neighbourhood_and_the_explorer_expand(tmp_path: Path) -> None:
    from memkit.widgets import GraphExplorer

    with memkit.open(f"sqlite:///{tmp_path / 'w.db'}") as mem:
        _fill_sync(mem)
        explorer = GraphExplorer(mem, max_nodes=10, group=None)  # the representative cut, not the groups
        explorer.draw_button.click()
        assert explorer.view is not None and len(explorer.view.nodes) == 10
        sent: list[dict[str, Any]] = []
        explorer.canvas.send = sent.append  # type: ignore[method-assign]
        # The drawn tool was used by a step of each run; only one of them is drawn.
        tool = next(n for n in explorer.view.nodes if n.type == "Tool")
        explorer.canvas._on_message(explorer.canvas, {"event": "expand", "id": tool.id}, [])
        [reply] = sent
        assert reply["event"] == "expanded" and reply["id"] == tool.id
        assert [n["type"] for n in reply["nodes"]] == ["Step"]
        assert {(e["from"], e["to"]) for e in reply["edges"]} >= {(n["id"], tool.id) for n in reply["nodes"]}
        assert explorer.selected is None
        explorer.canvas.selected_id = reply["nodes"][0]["id"]
        assert explorer.selected is not None and explorer.selected.type == "Step"
        assert {n.id for n in neighbourhood(mem, tool).nodes} >= {n["id"] for n in reply["nodes"]}
        explorer.canvas._on_message(explorer.canvas, {"event": "expand", "id": "<nope>"}, [])
        assert len(sent) == 1  # an unknown node changes nothing
        assert isinstance(explorer.canvas.graph, MemoryGraph)


def _fill_sync(mem: memkit.Memory) -> None:
    from memkit._sync import run_sync

    run_sync(fill(mem.provider))


def test_page_html_of_an_empty_graph_still_renders() -> None:
    page = page_html(select(MemoryGraph()), "empty")
    assert "showing all 0 nodes" in page
