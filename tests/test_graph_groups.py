"""The grouped graph view: the same groups on every store, nothing of another namespace, the same
grouping in networkx and pyvis.

Real stores: a SQLite file, a FalkorDB server and a Neo4j server, filled the same way (two users
sharing a workflow id and genes, runs whose first step searches memory).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from graph_scale import fill_scale

import memkit
from memkit._core._errors import InvalidInputError
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.graph import memory_graph
from memkit.graph._view import expansion, select
from memkit.widgets._graph import _with_namespace_recalls


def _structure(mem: memkit.Memory) -> dict[str, Any]:
    graph = _with_namespace_recalls(mem, memory_graph(mem, "ana", "bio", limit=10_000), "ana", "bio")
    view = select(graph, 300, "entity")
    assert view.groups is not None
    key = {n.id: (n.type, str(n.properties.get("name") or n.properties.get("run_id") or n.properties.get("content")
                                or n.properties.get("workflow_id") or n.properties.get("user_id")))
           for n in view.graph.nodes}
    biggest = max((n.id for n in view.nodes if n.id in view.counts), key=lambda i: (view.counts[i], key[i]))
    fresh, edges, _, left = expansion(view, biggest, {n.id for n in view.nodes})
    # "used by runs": each recalled memory's runs, and a run opened as its ordered steps
    index = view.groups.index
    assert index is not None
    memories = [n for n in view.graph.nodes if n.type == "Memory"]
    used = {key[m.id]: [key[t] for t in index.runs_that_recalled(m.id)] for m in memories}
    run = min(t for runs in used.values() for t in runs)  # the same run on every store
    run_id = next(i for i, k in key.items() if k == run)
    steps, step_edges, _, _ = expansion(view, run_id, {n.id for n in view.nodes})
    return {
        "nodes": sorted(key[n.id] for n in view.nodes),
        "edges": sorted((e.type, key[e.source], key[e.target], e.properties.get("count")) for e in view.edges),
        "counts": sorted((key[g], c) for g, c in view.counts.items()),
        "opened": (key[biggest], sorted(key[n.id] for n in fresh), len(edges), left),
        "users": {n.properties.get("user_id") for n in view.graph.nodes},
        "used_by": {m: runs for m, runs in used.items() if runs},
        "run": (run, [key[n.id] for n in steps], sorted((e.type, key[e.source], key[e.target]) for e in step_edges)),
    }


@pytest.fixture
def stores(tmp_path: Path, falkordb_server: Any, neo4j_uri: str) -> Iterator[list[memkit.Memory]]:
    neo = Neo4jAdapter(neo4j_uri)
    opened = [memkit.open(f"sqlite:///{tmp_path / 'g.db'}?embedder=none"),
              memkit.Memory(FalkorDBAdapter.from_url(falkordb_server.url(f"groups-{uuid.uuid4().hex[:8]}"))),
              memkit.Memory(neo)]
    try:
        for mem in opened:
            mem.reset()
            fill_scale(mem, n=600, runs=6)
        yield opened
    finally:
        for mem in opened:
            mem.close()


def test_grouped_views_are_the_same_on_sqlite_falkordb_and_neo4j(stores: list[memkit.Memory]) -> None:
    sqlite, falkor, neo = (_structure(m) for m in stores)
    assert sqlite["users"] == {"ana"}  # ben shares the workflow id and the genes; none of his shows
    assert falkor == sqlite
    assert neo == sqlite
    assert any(t == "Entity" and name == "TP53" for (t, name), _ in sqlite["counts"])
    assert len(sqlite["used_by"]) >= 3  # memories that runs recalled
    assert [t for t, _ in sqlite["run"][1]].count("Step") == 5  # a run opens as its five steps (and what they recalled)


def test_grouping_reaches_networkx_and_pyvis(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'n.db'}?embedder=none") as mem:
        fill_scale(mem, n=400, runs=4)
        graph = memory_graph(mem, "ana", "bio")
        nx_graph = graph.to_networkx(group="entity")
        view = select(graph, 300, "entity")
        assert set(nx_graph.nodes) == {n.id for n in view.nodes}
        assert nx_graph.number_of_edges() == len(view.edges)
        tp53 = next(i for i, d in nx_graph.nodes(data=True) if d.get("name") == "TP53")
        assert nx_graph.nodes[tp53]["memories"] == view.counts[tp53] > 10
        assert all(d["type"] != "Memory" for _, d in nx_graph.nodes(data=True))
        net = graph.to_pyvis(group="entity")
        assert {n["id"] for n in net.nodes} == {n.id for n in view.nodes}
        assert graph.to_networkx().number_of_nodes() == len(graph.nodes)  # ungrouped as before
        with pytest.raises(InvalidInputError, match="group must be"):
            graph.to_networkx(group="gene")


def test_every_memory_is_one_click_away_and_groups_page(tmp_path: Path) -> None:
    from memkit.widgets import GraphExplorer

    with memkit.open(f"sqlite:///{tmp_path / 'p.db'}?embedder=none") as mem:
        fill_scale(mem, n=800, runs=4)
        explorer = GraphExplorer(mem, max_nodes=120)
        explorer.namespace.value = ("ana", "bio")
        explorer.draw()
        view = explorer.view
        assert view is not None and view.groups is not None and len(view.nodes) <= 120
        assert not any(n.type in ("Memory", "Step") for n in view.nodes)
        memories = {n.id for n in view.graph.nodes if n.type == "Memory"}
        steps = {n.id for n in view.graph.nodes if n.type == "Step"}
        recorded = {e.target for e in view.graph.edges if e.type == "RECORDED_AS"}
        reachable = {m for members in view.groups.members.values() for m in members}
        assert memories - recorded <= reachable and steps <= reachable  # nothing unreachable
        other = next(n for n in view.nodes if n.type == "Group")
        assert view.counts[other.id] > 0  # the memories with no metadata or a misspelt key
        sent: list[dict[str, Any]] = []
        explorer.canvas.send = sent.append  # type: ignore[method-assign]
        tp53 = next(n for n in view.nodes if n.properties.get("name") == "TP53")
        first = explorer.canvas.open_group(tp53.id)
        second = explorer.canvas.open_group(tp53.id)  # "show more": the next page, nothing twice
        assert len(first) == 60 and second and not {n.id for n in first} & {n.id for n in second}
        assert sent[-1]["shown"] == min(120, view.counts[tp53.id])
        assert all(n["type"] == "Memory" and "offset" in n for n in sent[0]["nodes"])
        # a run opens as its ordered steps
        run = next(n for n in view.nodes if n.type == "Trace")
        steps_drawn = explorer.canvas.open_group(run.id)
        assert [n.properties["order"] for n in steps_drawn if n.type == "Step"] == [0, 1, 2, 3, 4]
        # search finds a memory that is not drawn and draws it
        hit = explorer.canvas.find("note 17:")
        assert hit is not None and hit.type == "Memory" and sent[-1]["focus"] == [hit.id]
        explorer.canvas.find("no such caption anywhere")
        assert sent[-1] == {"event": "error", "message": 'no node matches "no such caption anywhere"'}


def test_bad_options_are_refused_clearly(tmp_path: Path) -> None:
    from memkit.widgets import GraphExplorer

    with memkit.open(f"sqlite:///{tmp_path / 'b.db'}") as mem:
        for bad in ({"group": "gene"}, {"size_by": "<b>"}, {"color_by": "weight"}):
            with pytest.raises(InvalidInputError, match=next(iter(bad))):
                GraphExplorer(mem, **bad)
        with pytest.raises(InvalidInputError, match="group must be"):
            select(memory_graph(mem), 10, "topic")


def test_a_first_click_opens_a_group_from_the_page_the_kernel_set_ahead(tmp_path: Path) -> None:
    """The live widget holds each drawn group's first page after the drawing; the browser opens a group
    from it and tells the kernel, whose "show more" then continues after it."""
    from memkit.widgets import GraphExplorer

    with memkit.open(f"sqlite:///{tmp_path / 'r.db'}?embedder=none") as mem:
        fill_scale(mem, n=800, runs=4)
        explorer = GraphExplorer(mem, max_nodes=120)
        sent: list[dict[str, Any]] = []
        explorer.canvas.send = sent.append  # type: ignore[method-assign]
        explorer.namespace.value = ("ana", "bio")
        explorer.draw()
        view = explorer.view
        assert view is not None and view.groups is not None
        reserved = explorer.canvas.reserve
        assert set(reserved["groups"]) == {n.id for n in view.nodes if view.counts.get(n.id)}
        tp53 = next(n for n in view.nodes if n.properties.get("name") == "TP53")
        page = reserved["groups"][tp53.id]
        assert len(page["ids"]) == page["shown"] == 60
        assert all(reserved["nodes"][i]["type"] == "Memory" and i in page["offsets"] for i in page["ids"])
        explorer.canvas._on_message(None, {"event": "opened", "id": tp53.id}, [])
        more = explorer.canvas.open_group(tp53.id, 60)  # what "show more" asks for next
        assert len(more) == 60 and not set(page["ids"]) & {n.id for n in more}
        assert sent[-1]["shown"] == 120
