"""The panels driven as a user would, in plain pytest: set .value, .click(), read widget state."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import memkit
from memkit._demo import demo_items
from memkit._display import format_time
from memkit.adapters import InMemoryAdapter
from memkit.frames import TRACE_COLUMNS, compare_runs, run_steps, runs_frame
from memkit.traces import ExecutionHistory
from memkit.widgets import Dashboard, GraphExplorer, NamespaceBrowser, TraceReplay
from memkit.widgets._static import snapshot_html

HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[memkit.Memory]:
    with memkit.open(f"sqlite:///{tmp_path / 'demo.db'}") as mem:
        mem.add_many(demo_items())
        yield mem


@pytest.fixture
def small(tmp_path: Path) -> Iterator[memkit.Memory]:
    """One namespace of 12 numbered memories plus a neighbour namespace."""
    with memkit.open(f"sqlite:///{tmp_path / 'small.db'}") as mem:
        for n in range(12):
            mem.add(f"note {n:02d} about {'TP53' if n % 3 == 0 else 'KRAS'}", "u1", "bio",
                    {"gene": "TP53" if n % 3 == 0 else "KRAS", "n": n})
        mem.add("the neighbour's note", "u2", "bio", {"gene": "TP53"})
        yield mem


def _contents(browser: NamespaceBrowser) -> list[str]:
    return [item.content for item in browser.items]


def test_namespaces_are_listed_with_counts_and_last_activity(demo: memkit.Memory) -> None:
    browser = NamespaceBrowser(demo)
    infos = demo.namespaces()
    assert len(browser.namespace.options) == len(infos) == 9
    assert "9 namespaces" in browser.overview.value
    for info in infos:
        assert f"{info.count:,}" in browser.overview.value
        assert info.last_at is not None and info.last_at.strftime("%Y-%m-%d %H:%M:%S") in browser.overview.value
    assert browser.namespace.value == (infos[0].user_id, infos[0].agent_id)


def test_paging_walks_the_namespace_newest_first_without_overlap(small: memkit.Memory) -> None:
    browser = NamespaceBrowser(small, page_size=5)
    browser.namespace.value = ("u1", "bio")
    seen: list[str] = []
    assert browser.prev_button.disabled
    seen += _contents(browser)
    assert browser.page_label.value == "memories 1–5 (of 12 records in the namespace)"
    browser.next_button.click()
    seen += _contents(browser)
    assert browser.page_label.value == "memories 6–10 (of 12 records in the namespace)"
    browser.next_button.click()
    seen += _contents(browser)
    assert browser.next_button.disabled and not browser.prev_button.disabled
    assert seen == [f"note {n:02d} about {'TP53' if n % 3 == 0 else 'KRAS'}" for n in range(11, -1, -1)]
    browser.prev_button.click()
    assert browser.page_label.value == "memories 6–10 (of 12 records in the namespace)"


def test_metadata_filter_pages_only_matching_rows(small: memkit.Memory) -> None:
    browser = NamespaceBrowser(small, page_size=3)
    browser.namespace.value = ("u1", "bio")
    browser.filters.value = '{"gene": "TP53"}'
    browser.search_button.click()
    assert _contents(browser) == ["note 09 about TP53", "note 06 about TP53", "note 03 about TP53"]
    assert "matching the filter" in browser.page_label.value
    browser.next_button.click()
    assert _contents(browser) == ["note 00 about TP53"]
    assert all("neighbour" not in c for c in _contents(browser))


@pytest.mark.parametrize(("text", "expected"), [
    ("{gene: TP53}", "not valid JSON"),
    ('["TP53"]', "must be a JSON object"),
    ('{"gene": {"$regex": "T"}}', "InvalidInputError"),
])
def test_bad_filter_shows_a_clear_error_instead_of_stale_rows(small: memkit.Memory, text: str, expected: str) -> None:
    browser = NamespaceBrowser(small, page_size=5)
    browser.namespace.value = ("u1", "bio")
    assert len(browser.rows.rows) == 5
    browser.filters.value = text
    browser.search_button.click()
    assert expected in browser.status.value
    assert "memkit-error" in browser.status.value
    assert browser.rows.rows == [] and browser.items == [] and "error" in browser.rows.empty_text
    assert not browser.rows.busy


def test_search_offers_only_the_modes_the_store_supports_and_shows_scores(small: memkit.Memory) -> None:
    browser = NamespaceBrowser(small)
    browser.namespace.value = ("u1", "bio")
    # A new SQLite store embeds with the default model: every mode, hybrid preselected.
    assert browser.mode.options == ("keyword", "semantic", "hybrid") and browser.mode.value == "hybrid"
    browser.query.value = "TP53"
    browser.search_button.click()
    assert browser.items and all(i.score is not None for i in browser.items)
    assert {i.content for i in browser.items[:4]} == {f"note {n:02d} about TP53" for n in (0, 3, 6, 9)}
    assert all(i.score > 0 for i in browser.items)  # the list stops where relevance ends
    first = browser.rows.rows[0]
    assert first["score"] is not None and [leg["name"] for leg in first["legs"]] == ["keyword", "semantic"]
    assert first["legs"][0]["found"] and first["legs"][0]["rank"] >= 1
    browser.rows.value = browser.items[0].id
    assert "keyword</span>" in browser.detail.value and "rank " in browser.detail.value
    assert "&quot;mode&quot;" not in browser.detail.value  # a bar per leg, not JSON


def test_a_keyword_only_store_offers_keyword_search_only(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'kw.db'}?embedder=none") as mem:
        for n in range(4):
            mem.add(f"note {n} about TP53", "u1", "bio")
        browser = NamespaceBrowser(mem)
        browser.namespace.value = ("u1", "bio")
        assert browser.mode.options == ("keyword",)
        browser.query.value = "TP53"
        browser.search_button.click()
        assert len(browser.items) == 4 and all(i.score is not None for i in browser.items)
        browser.rows.value = browser.items[0].id
        assert "rank 1, score" in browser.detail.value and "semantic<" not in browser.detail.value


def test_memory_text_is_escaped_everywhere(small: memkit.Memory) -> None:
    small.add(HOSTILE, "u1", "bio", {"note": HOSTILE})
    browser = NamespaceBrowser(small)
    browser.namespace.value = ("u1", "bio")
    browser.rows.value = browser.items[0].id
    assert browser.rows.rows[0]["text"] == HOSTILE  # sent as text; the grid sets textContent
    for html in (browser.detail.value, snapshot_html(browser)):
        assert "<img" not in html and "<script>" not in html
        assert "&lt;img src=x onerror=" in html


def test_trace_memories_read_as_steps_in_the_table_and_detail(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        mem.add_trace("bio", "wf-1", {"tool": "bwa", "step_index": 3, "status": "failed", "duration": 2.1,
                                      "error": "Connection reset by peer", "parameters": {"k": 1}}, user_id="u1")
        mem.add_trace("bio", "wf-1", {"tool": "bwa", "step_index": 0}, user_id="u1")  # no status
        browser = NamespaceBrowser(mem)
        assert browser.rows.rows == []  # memories by default: trace steps have their own switch
        browser.kind.value = "traces"
        texts = [r["text"] for r in browser.rows.rows]
        assert texts[1] == 'step 3 · bwa · failed · 2.1 s · "Connection reset by peer"'
        assert texts[0] == "step 0 · bwa · unknown"
        assert all("data={" not in r["text"] + r["full"] + r["metadata_full"] for r in browser.rows.rows)
        assert browser.rows.rows[1]["created"].endswith(" UTC")
        browser.rows.value = browser.items[1].id
        assert "data={" not in browser.detail.value and "Connection reset by peer" in browser.detail.value


def test_delete_needs_confirmation_and_stays_in_its_namespace(small: memkit.Memory) -> None:
    browser = NamespaceBrowser(small, page_size=5)
    browser.namespace.value = ("u1", "bio")
    target = browser.items[0]
    assert browser.delete_button.disabled
    browser.rows.value = target.id
    browser.delete_button.click()
    assert browser.confirm_box.layout.display == "flex"
    assert target.id in browser.confirm_text.value
    browser.cancel_button.click()
    assert browser.confirm_box.layout.display == "none"
    assert small.get(target.id) is not None
    browser.rows.value = target.id
    browser.delete_button.click()
    browser.confirm_button.click()
    assert small.get(target.id) is None
    assert "deleted memory" in browser.status.value
    assert browser.count == 11 and target.id not in [i.id for i in browser.items]
    assert [ns.count for ns in small.namespaces() if ns.user_id == "u2"] == [1]


def test_trace_replay_lists_runs_filters_sorts_and_opens_one(demo: memkit.Memory, tmp_path: Path) -> None:
    panel = TraceReplay(demo)
    expected = runs_frame(demo)
    assert panel.total_runs == len(expected) == 18  # 3 users x 2 runs x 3 workflows in the demo sample
    assert [r["run"] for r in panel.runs] == list(expected.index)  # newest first
    panel.filters = {"status": "failed"}
    assert {r["status"] for r in panel.runs} == {"failed"}
    assert len(panel.runs) == int(expected["status"].eq("failed").sum()) > 0
    assert "runs, " in panel.message and panel.message_kind == "error"  # failed runs in view
    panel.filters = {"tool": "gatk", "min_duration": 600}
    assert panel.runs and all(r["run"] in set(expected[expected.duration_s >= 600].index) for r in panel.runs)
    panel.filters = {}
    panel.sort = {"column": "duration_s", "descending": False}
    durations = [expected.loc[r["run"], "duration_s"] for r in panel.runs]
    assert durations == sorted(durations)
    run = "variant-calling-alice-1/run-alice-1"
    panel.run = run
    steps = run_steps(demo, run)
    assert panel.timeline["status_of"] == list(steps["status"]) and panel.timeline["n"] == len(steps)
    failed = [i for i, s in enumerate(panel.timeline["status_of"]) if s == "failed"]
    assert failed and "data={" not in str(panel.timeline)
    panel.step = failed[0]
    assert panel.detail["error"] == steps.iloc[failed[0]]["error"]
    assert panel.detail["parameters"]["gene"] == steps.iloc[failed[0]]["params.gene"]
    assert ["started", format_time(steps.iloc[failed[0]]["started_at"].to_pydatetime())] in panel.detail["facts"]
    panel.compare_with = "variant-calling-bob-1/run-bob-1"
    diff = compare_runs(demo, run, "variant-calling-bob-1/run-bob-1")
    assert [r["change"] for r in panel.comparison["rows"]] == list(diff["change"])
    out = tmp_path / "steps.csv"
    panel.export(str(out))
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["step_id"] for r in rows] == list(steps.index)
    assert set(TRACE_COLUMNS) <= set(rows[0]) and "wrote" in panel.message
    assert panel.summary().startswith("TraceReplay: 18 of 18 runs shown")


def test_trace_replay_shows_status_less_steps_as_unknown(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        mem.add_trace("bio", "wf-1", {"tool": "bwa", "step_index": 0}, user_id="u1")  # the README's example
        mem.add_trace("bio", "wf-1", {"tool": "gatk", "step_index": 1, "status": "exploded"}, user_id="u1")
        dash = Dashboard(mem)
        panel = dash.replay
        assert panel.runs == [] and "not read yet" in dash.summary()  # read when the tab is first shown
        dash.tabs.selected_index = 1
        assert [r["status"] for r in panel.runs] == ["unknown"]
        panel.run = panel.runs[0]["run"]
        assert panel.timeline["status_of"] == ["unknown", "unknown"]
        panel.step = 0
        assert panel.detail["status"] == "unknown" and panel.message_kind != "error"


def test_trace_replay_finds_the_memories_a_step_wrote(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        mem.add_trace("bio", "wf-1", {"tool": "blast", "step_index": 0, "status": "success"}, user_id="u1")
        mem.add("BLAST found 3 hits", "u1", "bio", {"workflow_id": "wf-1", "step_index": 0})
        mem.add("unrelated", "u1", "bio", {"workflow_id": "wf-2", "step_index": 0})
        mem.add("other namespace", "u2", "bio", {"workflow_id": "wf-1", "step_index": 0})
        panel = TraceReplay(mem)
        panel.run = "wf-1"
        panel.step = 0
        assert panel.detail["wrote"] is None  # only on request: it scans metadata
        assert panel.find_memories() == ["BLAST found 3 hits"]
        [wrote] = panel.detail["wrote"]
        assert wrote["text"] == "BLAST found 3 hits"
        assert panel.open_memory(wrote["id"])["text"] == "BLAST found 3 hits"  # a click on it opens it
        assert panel.memory["deleted"] is False


def _searching_run(mem: memkit.Memory, query: str = "TP53") -> list[memkit.MemoryItem]:
    """A run whose first step searches (3 hits) and writes a note; its second step searches nothing."""
    from memkit.traces import ExecutionHistory

    for text in ("TP53 knockdown raises apoptosis", "TP53 and BRCA1 at DNA damage sites",
                 "TP53 mutation in the tumour sample", "KRAS is unrelated"):
        mem.add(text, "alice", "bio", {"gene": text.split()[0]})
    history = ExecutionHistory(memory_provider=mem, workflow_id="audit", agent_id="bio", run_id="r1")
    with history.step("plan", tool="llm"):
        hits = mem.search(query, "alice", "bio", limit=3, mode="keyword")
        mem.add("plan: align then call", "alice", "bio", {"workflow_id": "audit", "step_index": 0})
    with history.step("align", tool="bwa"):
        pass
    history.flush()
    return hits


def test_the_step_detail_shows_what_the_step_recalled(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}?embedder=none") as mem:
        hits = _searching_run(mem)
        mem.delete(hits[1].id, user_id="alice", agent_id="bio")
        panel = TraceReplay(mem)
        [row] = panel.runs
        assert row["recalls"] == 1  # the run list counts the run's searches
        panel.run = row["run"]
        assert panel.timeline["recalls"] == [1, 0]
        panel.step = 0
        d = panel.detail
        assert d["recalled"] == 3 and d["keeps_recalls"]
        [recall] = d["recalls"]
        assert (recall["query"], recall["mode"], recall["namespace"]) == ("TP53", "keyword", "alice / bio")
        assert [h["rank"] for h in recall["hits"]] == [1, 2, 3]
        assert [h["id"] for h in recall["hits"]] == [h.id for h in hits]
        assert [h["deleted"] for h in recall["hits"]] == [False, True, False]
        assert all(h["legs"] == "keyword" for h in recall["hits"])
        # The deleted one opens as its snapshot; a live one as the stored memory.
        gone = panel.open_memory(hits[1].id)
        assert gone["deleted"] and gone["text"] == hits[1].content and "deleted" in gone["note"]
        assert panel.open_memory(hits[0].id)["text"] == hits[0].content
        assert panel.find_memories() == ["plan: align then call"]
        panel.step = 1
        assert panel.detail["recalled"] == 0 and panel.detail["recalls"] == [] and panel.memory == {}


def test_the_step_detail_keeps_a_hostile_query_as_data(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}?embedder=none") as mem:
        _searching_run(mem, query=HOSTILE + " TP53\x1b[31m")
        panel = TraceReplay(mem)
        panel.run = panel.runs[0]["run"]
        panel.step = 0
        query = panel.detail["recalls"][0]["query"]
        assert query.startswith(HOSTILE) and "\x1b" not in query and "\\x1b" in query  # escaped for display


def test_the_memory_detail_lists_the_steps_that_recalled_it(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}?embedder=none") as mem:
        hits = _searching_run(mem)
        with memkit.recall_scope("notebook", step="by hand", step_index=4):
            mem.search("TP53", "alice", "bio", limit=1, mode="keyword")
        browser = NamespaceBrowser(mem)
        browser.namespace.value = ("alice", "bio")
        browser.rows.value = hits[0].id
        assert [(r.workflow_id, r.step_index, rank) for r, rank in browser.recalled_by(browser.selected)] == [
            ("audit", 0, 1), ("notebook", 4, 1)]
        html = browser.detail.value
        assert "recalled by 2 steps" in html and "0 · plan" in html and "4 · by hand" in html
        browser.rows.value = hits[2].id
        assert "recalled by 1 step<" in browser.detail.value
        unrelated = next(i for i in browser.items if i.content.startswith("KRAS"))
        browser.rows.value = unrelated.id
        assert "not recalled by any step" in browser.detail.value


def test_a_workflow_graph_draws_recall_edges_apart_from_the_recorded_ones(tmp_path: Path) -> None:
    from memkit.graph._page import payload

    with memkit.open(f"sqlite:///{tmp_path / 't.db'}?embedder=none") as mem:
        hits = _searching_run(mem)
        mem.delete(hits[2].id, user_id="alice", agent_id="bio")
        explorer = GraphExplorer(mem)
        explorer.scope.value = "workflow"
        explorer.draw()
        assert explorer.view is not None and explorer.view.layout == "workflow"
        data = payload(explorer.view)
        recalled = [e for e in data["edges"] if e["type"] == "RECALLED"]
        recorded = [e for e in data["edges"] if e["type"] == "RECORDED_AS"]
        assert len(recalled) == 3 and len(recorded) == 2
        assert {e["to"] for e in recalled} == {h.id for h in hits}
        assert recalled[0]["dashes"] and not recorded[0]["dashes"]
        assert recalled[0]["color"] != recorded[0]["color"]
        assert sorted(e["title"].split("\n")[1].split(" · ")[0] for e in recalled) == ["rank 1", "rank 2", "rank 3"]
        nodes = {n["id"]: n for n in data["nodes"]}
        gone = nodes[hits[2].id]
        assert gone["deleted"] and gone["label"].startswith("(deleted) " + hits[2].content[:12])
        assert not nodes[hits[0].id]["deleted"]
        assert [k["label"] for k in data["edge_legend"]] == ["recorded as", "recalled"]
        # Each recalled memory sits below the step that recalled it.
        step = next(n for n in data["nodes"] if n["type"] == "Step" and n["label"] == "0 · llm")
        assert all(nodes[h.id]["y"] > step["y"] for h in hits)
        explorer.recalls.value = False  # redraws without them
        assert not any(e.type == "RECALLED" for e in explorer.view.edges)


def test_recall_nodes_from_a_graph_database_draw_as_the_same_edges() -> None:
    from memkit.graph import GraphEdge, GraphNode, MemoryGraph
    from memkit.graph._view import collapse_recall_nodes

    graph = MemoryGraph(
        [GraphNode("s", "Step", {"order": 0}), GraphNode("r", "Recall", {"query": "TP53", "mode": "hybrid"}),
         GraphNode("m", "Memory", {"content": "TP53"})],
        [GraphEdge("e1", "RECALLS", "s", "r"), GraphEdge("e2", "RECALLED", "r", "m", {"rank": 2, "score": 0.5})])
    out = collapse_recall_nodes(graph)
    assert [n.id for n in out.nodes] == ["s", "m"]
    [edge] = out.edges
    assert (edge.type, edge.source, edge.target, edge.properties["rank"]) == ("RECALLED", "s", "m", 2)


def test_trace_replay_on_an_empty_store_and_a_bad_run(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        panel = TraceReplay(mem)
        assert panel.runs == [] and panel.total_runs == 0 and "no traces" in panel.message
        panel.run = "nope"
        assert panel.message_kind == "error" and panel.timeline == {}


def test_trace_replay_keeps_hostile_text_as_data(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        mem.add_trace("bio", "wf-<b>", {"step_name": "<b>x</b>", "tool": HOSTILE, "status": "failed",
                                         "error": HOSTILE + "\x1b[31m", "parameters": {"q": HOSTILE},
                                         "result": {"r": "<i>r</i>"}, "step_index": 0}, user_id="u1")
        panel = TraceReplay(mem)
        panel.run = panel.runs[0]["run"]
        panel.step = 0
        # The panel sends text; the browser module puts it in with textContent (tests/test_lab.py looks).
        assert panel.detail["parameters"] == {"q": HOSTILE}
        assert panel.detail["error"] == HOSTILE + "\\x1b[31m"  # control characters escaped


def test_graph_explorer_caps_nodes_and_switches_scope(demo: memkit.Memory) -> None:
    explorer = GraphExplorer(demo, max_nodes=10, group=None)  # the cut; tests/test_graph_groups.py has the groups
    explorer.namespace.value = ("alice", "bioinformatics")
    explorer.draw_button.click()
    assert explorer.view is not None and len(explorer.view.nodes) == 10
    assert f"showing 10 of {explorer.view.total_nodes} nodes" in explorer.canvas.data["message"]
    assert len(explorer.canvas.data["nodes"]) == 10
    explorer.scope.value = "workflow"
    assert explorer.namespace.layout.display == "none" and explorer.workflow.layout.display == "flex"
    explorer.max_nodes.value = 100
    explorer.workflow.value = ("alice", "bioinformatics", "variant-calling-alice-1")
    explorer.draw_button.click()
    types = {n.type for n in explorer.view.nodes}
    assert {"Workflow", "Trace", "Step", "Tool"} <= types
    assert sum(n.type == "Step" for n in explorer.view.nodes) == 5  # variant calling has five steps
    assert "showing all" in explorer.canvas.data["message"]


def test_dashboard_has_the_three_panels_in_tabs(demo: memkit.Memory) -> None:
    dash = Dashboard(demo)
    assert [dash.tabs.get_title(i) for i in range(3)] == ["Namespaces", "Traces", "Graph"]
    assert dash.tabs.children[0] is dash.browser.widget
    bundle = dash._repr_mimebundle_()
    assert bundle["text/plain"].startswith("Dashboard\nNamespaceBrowser: 9 namespaces")
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_a_failing_store_shows_an_error_instead_of_raising(small: memkit.Memory) -> None:
    browser = NamespaceBrowser(small)
    small.close()
    browser.refresh()
    assert "memkit-error" in browser.status.value


def test_modes_a_provider_declares_are_offered_and_passed_through() -> None:
    """No adapter on this branch has an embedder yet, so a subclass declares hybrid and records the call."""
    from typing import ClassVar

    from memkit.adapters._memory._adapter import InMemoryAdapter

    class Hybrid(InMemoryAdapter):
        search_modes = ("keyword", "hybrid")
        seen: ClassVar[list[str | None]] = []

        async def search(self, *args: Any, mode: str | None = None, **kw: Any) -> list[memkit.MemoryItem]:
            self.seen.append(mode)
            return await super().search(*args, mode="keyword", **kw)

    with memkit.Memory(Hybrid()) as mem:
        mem.add("TP53 note", "u", "a")
        browser = NamespaceBrowser(mem)
        assert browser.mode.options == ("keyword", "hybrid")
        browser.mode.value = "hybrid"
        browser.query.value = "TP53"
        browser.search_button.click()
        assert Hybrid.seen == ["hybrid"] and "best hybrid matches" in browser.page_label.value


def test_trace_replay_can_skip_counting_recalls(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}?embedder=none") as mem:
        _searching_run(mem)
        panel = TraceReplay(mem, recalls=False)
        [row] = panel.runs
        assert row["recalls"] is None  # not counted: shown as "—", not as zero
        panel.run = row["run"]
        assert panel.timeline["recalls"] == [0, 0]
        panel.step = 0
        assert panel.detail["recalled"] == 3  # the open step still lists what it recalled


class _KeepsNoRecalls:
    """A store that implements the port (and export) but keeps no recalls, as a third-party adapter may."""

    _RECALL_NAMES = frozenset({"recalls", "get_recall", "add_recalls", "record_recalls"})

    def __init__(self) -> None:
        self._inner = InMemoryAdapter()

    def __getattr__(self, name: str) -> object:
        if name in self._RECALL_NAMES:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_the_views_on_a_store_that_keeps_no_recalls() -> None:
    from memkit.frames import runs_frame as runs_of

    store = _KeepsNoRecalls()
    assert not isinstance(store, memkit.SupportsRecalls)
    with memkit.Memory(store) as mem:  # type: ignore[arg-type]
        mem.add("TP53 knockdown", "u1", "bio")
        mem.add_trace("bio", "wf-1", {"tool": "blast", "step_index": 0, "status": "success"}, user_id="u1")
        assert runs_of(mem)["recalls"].isna().all()  # unknown, not zero
        panel = TraceReplay(mem)
        assert panel.runs[0]["recalls"] is None
        panel.run = panel.runs[0]["run"]
        panel.step = 0
        assert panel.detail["keeps_recalls"] is False and panel.detail["recalls"] == []
        explorer = GraphExplorer(mem)
        explorer.scope.value = "workflow"
        explorer.draw()
        assert explorer.view is not None and not any(e.type == "RECALLED" for e in explorer.view.edges)


def test_the_browser_switches_between_memories_traces_and_recalls(tmp_path: Path) -> None:
    from memkit.traces import ExecutionHistory

    with memkit.open(f"sqlite:///{tmp_path / 'k.db'}?embedder=none") as mem:
        for user in ("ana", "ben"):  # two users, the same workflow id
            mem.add(f"TP53 knockdown ({user})", user, "bio", {"gene": "TP53"})
            history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id=user,
                                       run_id="r1")
            with history.step("look_up", tool="memory"):
                mem.search("TP53", user, "bio", limit=3, mode="keyword")
            history.flush()
        browser = NamespaceBrowser(mem)
        browser.namespace.value = ("ana", "bio")
        assert browser.kind.value == "memories" and [r["text"] for r in browser.rows.rows] == ["TP53 knockdown (ana)"]
        browser.kind.value = "traces"
        assert len(browser.rows.rows) == 1 and browser.rows.rows[0]["trace"]
        browser.kind.value = "recalls"
        assert browser.rows.kind == "recalls"
        assert [r["text"] for r in browser.rows.rows] == ["TP53"] and "1 hits" in browser.rows.rows[0]["metadata"]
        assert "ben" not in str(browser.rows.rows)
        browser.rows.column_filters = {"metadata": "KEYWORD · 1 hits"}  # what the cell shows, any case
        assert len(browser.rows.rows) == 1
        browser.rows.column_filters = {"text": "BRCA1"}
        assert browser.rows.rows == [] and browser.rows.caption == "recalls 0–0 of 0 matching the column filters"
        browser.rows.column_filters = {}
        browser.kind.value = "memories"
        assert browser.side.layout.display == "none"  # nothing opened: the table has the whole width
        browser.rows.value = browser.items[0].id
        assert browser.side.layout.display == "flex"
        browser.delete_button.click()
        text = browser.confirm_text.value
        assert "Delete 1 memory from <b>ana / bio</b>" in text and "TP53 knockdown (ana)" in text
        assert browser.confirm_button.description == "yes, delete this memory"
        browser.cancel_button.click()
        assert mem.get(browser.items[0].id) is not None


def test_column_filters_and_csv_cover_the_whole_namespace(tmp_path: Path) -> None:
    """A column filter finds rows beyond the first page; the CSV holds every matching row, not the page."""
    with memkit.open(f"sqlite:///{tmp_path / 'w.db'}?embedder=none") as mem:
        items = []
        for n in range(230):  # older rows carry the word, so the first page (newest) has none of them
            gene = "BRCA1" if n < 40 else ("TP53" if n % 2 else "KRAS")
            items.append({"content": f"note {n:03d} on {gene}", "user_id": "ana", "agent_id": "bio",
                          "metadata": {"gene": gene, **({"lab": "North"} if n % 7 == 0 else {})}})
        # the neighbour writes the same gene: none of it may show here
        items += [{"content": f"neighbour {n} on BRCA1", "user_id": "ben", "agent_id": "bio",
                   "metadata": {"gene": "BRCA1"}} for n in range(30)]
        mem.add_many(items)
        browser = NamespaceBrowser(mem, page_size=20)
        browser.namespace.value = ("ana", "bio")
        assert not any("BRCA1" in r["full"] for r in browser.rows.rows)
        browser.rows.column_filters = {"text": "brca1"}  # any case, as typed in the box
        assert len(browser.rows.rows) == 20 and all("BRCA1" in r["full"] for r in browser.rows.rows)
        assert browser.rows.caption == "memories 1–20 of 40 matching the column filters"
        assert [r["n"] for r in browser.rows.rows] == list(range(1, 21))
        browser.next_button.click()
        assert browser.rows.caption == "memories 21–40 of 40 matching the column filters"
        assert browser.next_button.disabled
        seen = {i.content for i in browser.items}
        text, count, capped = browser.to_csv([("n", "#"), ("text", "memory"), ("metadata", "metadata")])
        assert (count, capped) == (40, False)
        rows = list(csv.reader(text.splitlines()))
        assert rows[0] == ["#", "memory", "metadata"] and len(rows) == 41
        assert {r[1] for r in rows[1:]} == {f"note {n:03d} on BRCA1" for n in range(40)} >= seen
        assert "neighbour" not in text
        # two filters at once: both must match
        browser.rows.column_filters = {"text": "BRCA1", "metadata": "north"}
        assert browser.rows.caption == "memories 1–6 of 6 matching the column filters"
        # no filter: the CSV is the whole namespace (memories switch), every page
        browser.rows.column_filters = {}
        assert browser.rows.caption == "memories 1–20 (of 230 records in the namespace)"
        assert browser.to_csv()[1] == 230
        # a search: the grid shows one page of hits, the CSV every hit (all 40 BRCA1 notes, none of
        # the neighbour's), best first, with the column filters applied
        browser.query.value = "BRCA1"
        browser.search_button.click()
        assert len(browser.items) == 20
        text, count, capped = browser.to_csv([("text", "memory"), ("score", "score")])
        rows = list(csv.reader(text.splitlines()))[1:]
        assert (count, capped) == (40, False)
        assert {r[0] for r in rows} == {f"note {n:03d} on BRCA1" for n in range(40)}
        scores = [float(r[1]) for r in rows]
        assert scores == sorted(scores, reverse=True)
        sent: list[dict[str, object]] = []
        browser.rows.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
        browser._on_grid_message(browser.rows, {"action": "csv", "columns": [{"key": "text", "label": "memory"}]}, [])
        assert sent[0]["rows"] == 40 and "neighbour" not in str(sent[0]["text"])
        assert browser.rows.message == "CSV: every hit of the search, 40 rows, best first (not only this page)"
        browser.rows.column_filters = {"text": "note 00"}
        assert {i.content for i in browser.items} == {f"note {n:03d} on BRCA1" for n in range(10)} & {
            i.content for i in browser._hits or []}
        text, count, _ = browser.to_csv([("text", "memory")])
        assert count == 10 and {r[0] for r in list(csv.reader(text.splitlines()))[1:]} == {
            f"note {n:03d} on BRCA1" for n in range(10)}
        # a filter naming no column is refused with a clear message and shows nothing stale
        browser.rows.column_filters = {"bogus": "x"}
        assert "column_filters" in browser.status.value and "bogus" in browser.status.value
        assert browser.rows.rows == []


def test_the_csv_is_spreadsheet_safe(tmp_path: Path) -> None:
    """Text a spreadsheet would run as a formula opens as text; quotes, commas and newlines survive."""
    hostile = ['=HYPERLINK("http://x","click")', "+1+2", "-2+3", "@SUM(A1)", "\tTab", 'a "quoted", multi\nline',
               HOSTILE]
    with memkit.open(f"sqlite:///{tmp_path / 'h.db'}?embedder=none") as mem:
        for text in hostile:
            mem.add(text, "ana", "bio", {"note": text})
        browser = NamespaceBrowser(mem)
        browser.namespace.value = ("ana", "bio")
        text, count, _ = browser.to_csv([("text", "=label"), ("metadata", "metadata")])
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert count == len(hostile) and rows[0] == ["'=label", "metadata"]
        cells = {r[0] for r in rows[1:]}
        assert cells == {"'" + t if t[0] in "=+-@\t" else t for t in hostile}
        assert all(not c.startswith(("=", "+", "-", "@", "\t")) for r in rows for c in r)
        with pytest.raises(memkit.InvalidInputError, match="columns"):
            browser.to_csv([("content; DROP", "x")])


def test_a_csv_past_the_cap_stops_there_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memkit.widgets import _namespaces

    monkeypatch.setattr(_namespaces, "CSV_CAP", 50)  # the real cap is 100,000 rows: too many to write here
    with memkit.open(f"sqlite:///{tmp_path / 'c.db'}?embedder=none") as mem:
        mem.add_many([{"content": f"note {n} on TP53", "user_id": "ana", "agent_id": "bio"} for n in range(120)])
        browser = NamespaceBrowser(mem)
        browser.namespace.value = ("ana", "bio")
        sent: list[dict[str, object]] = []
        monkeypatch.setattr(browser.rows, "send", lambda content, buffers=None: sent.append(content))
        # what the CSV button sends from the browser
        browser._on_grid_message(browser.rows, {"action": "csv", "columns": [{"key": "text", "label": "memory"}]}, [])
        assert sent and sent[0]["event"] == "csv" and sent[0]["rows"] == 50
        assert str(sent[0]["text"]).count("\r\n") == 51
        assert (browser.rows.message, browser.rows.message_kind) == (
            "CSV: the first 50 rows only (an export stops at 50)", "warn")
        browser.rows.column_filters = {"text": "tp53"}
        assert browser.rows.caption == "memories 1–20 of the first 50 matching the column filters"
        # a search's CSV stops at what one search returns (here the cap too), and says so
        browser.rows.column_filters = {}
        browser.query.value = "TP53"
        browser.search_button.click()
        sent.clear()
        browser._on_grid_message(browser.rows, {"action": "csv", "columns": [{"key": "text", "label": "memory"}]}, [])
        assert sent[0]["rows"] == 50 and browser.rows.message_kind == "warn"
        assert browser.rows.message == "CSV: the best 50 hits of the search only (a search returns at most 50)"
        # a column the grid does not have is refused in the message line, and nothing is sent
        sent.clear()
        browser._on_grid_message(browser.rows, {"action": "csv", "columns": [{"key": "secret", "label": "x"}]}, [])
        assert sent == [] and browser.rows.message_kind == "error" and "secret" in browser.rows.message


def _nested_run(mem: memkit.Memory, run_id: str = "r-nested") -> None:
    """agent > (chain > (tool, tool that fails), llm): nested steps, as a researcher's agent writes them."""
    history = ExecutionHistory(memory_provider=mem, workflow_id="triage", agent_id="bio", user_id="u1",
                                      run_id=run_id)
    with history.step("answer", tool="agent"):
        with history.step("gather", tool="chain"):
            with history.step("look_up", tool="pubmed"):
                pass
            with pytest.raises(TimeoutError), history.step("fetch", tool="http"):
                raise TimeoutError("remote closed")
        with history.step("write", tool="llm"):
            pass


def test_trace_replay_sends_a_nested_run_as_a_tree(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        _nested_run(mem)
        history = ExecutionHistory(memory_provider=mem, workflow_id="flat", agent_id="bio", user_id="u1")
        for name in ("a", "b"):
            with history.step(name, tool="x"):
                pass
        panel = TraceReplay(mem)
        panel.run = next(r["run"] for r in panel.runs if r["workflow_id"] == "triage")
        tl = panel.timeline
        # Stored children first (a step is written when it ends); shown parent first, children under it.
        assert [label.split(" · ")[1] for label in tl["label"]] == [
            "answer (agent)", "gather (chain)", "look_up (pubmed)", "fetch (http)", "write (llm)"]
        assert tl["depth"] == [0, 1, 2, 2, 1]
        assert tl["parent"] == [-1, 0, 1, 1, 0]
        assert tl["children"] == [2, 2, 0, 0, 0]
        assert tl["status_of"] == ["success", "success", "success", "failed", "success"]  # the chain caught it
        dur = tl["duration_s"]
        assert tl["rolled_s"][1] == pytest.approx(dur[2] + dur[3], abs=0.002)
        assert tl["rolled_s"][0] == pytest.approx(dur[1] + dur[4], abs=0.002)
        assert tl["rolled"][0] and tl["rolled"][2] == "" and tl["rolled_s"][2] is None
        # A position is a shown row: the step opened is the row clicked, and the export keeps the tree order.
        panel.step = 3
        assert panel.detail["title"].endswith("fetch") and "TimeoutError" in panel.detail["error"]
        assert list(panel.steps["step_name"]) == ["answer", "gather", "look_up", "fetch", "write"]
        # The same parents in run_steps, by step_index; a top-level step has none.
        steps = run_steps(mem, panel.run).set_index("step_name")
        parent = steps["parent_step_index"]
        assert str(parent.dtype) == "Int64" and parent.index[parent.isna()].tolist() == ["answer"]
        assert parent.dropna().to_dict() == {"gather": 0, "look_up": 1, "fetch": 1, "write": 0}
        assert list(steps.columns[-2:]) == ["parent_step_index", "timing"]
        # A flat run is sent as before: no tree columns at all.
        panel.run = next(r["run"] for r in panel.runs if r["workflow_id"] == "flat")
        assert not {"depth", "parent", "children", "rolled"} & set(panel.timeline)


def test_a_broken_tree_keeps_every_step() -> None:
    from memkit.frames._runs import _parent_positions
    from memkit.widgets._trace_rows import step_tree

    steps = pd.DataFrame({"step_index": pd.array([0, 1, 2, 3, 4], dtype="Int64")},
                         index=pd.Index(["s0", "s1", "s2", "s3", "s4"], name="step_id"))
    payloads = {
        "s0": {"parent_step_index": 1}, "s1": {"parent_step_index": 0},  # a loop of parents
        "s2": {"parent_step_index": 2, "span_id": "b"},  # its own parent
        "s3": {"parent_step_index": 99},  # a parent outside the run
        "s4": {"parent_span_id": "b", "span_id": "c"},  # streamed live: the parent named by span only
    }
    parents = _parent_positions(steps, payloads)
    assert parents == [1, 0, None, None, 2]
    tree = step_tree(parents)
    assert tree is not None
    order, shown = tree
    assert sorted(order) == [0, 1, 2, 3, 4]  # nothing dropped, nothing twice
    assert order.index(4) == order.index(2) + 1 and shown[order.index(4)] == order.index(2)
    assert step_tree([None, None]) is None


def test_trace_replay_shows_the_same_tree_after_otlp_and_from_live_spans(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")
    from opentelemetry.sdk.trace import TracerProvider

    from memkit.otel import MemkitSpanProcessor, export_otlp, import_otlp

    with memkit.open(f"sqlite:///{tmp_path / 'a.db'}") as mem, memkit.open(f"sqlite:///{tmp_path / 'b.db'}") as copy:
        _nested_run(mem)
        import_otlp(copy, export_otlp(mem))
        shown = []
        for store in (mem, copy):
            panel = TraceReplay(store)
            panel.run = panel.runs[0]["run"]
            shown.append({k: panel.timeline[k] for k in ("label", "depth", "parent", "status_of")})
        assert shown[0] == shown[1] and shown[0]["depth"] == [0, 1, 2, 2, 1]
    # Spans streamed as they end name their parent by span id only (it has not ended yet).
    with memkit.open(f"sqlite:///{tmp_path / 'live.db'}") as live:
        provider = TracerProvider()
        provider.add_span_processor(MemkitSpanProcessor(live, user_id="alice", agent_id="live", workflow_id="chat"))
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("agent"):
            with tracer.start_as_current_span("chain"), tracer.start_as_current_span("tool"):
                pass
            with tracer.start_as_current_span("llm"):
                pass
        assert all("parent_step_index" not in m.metadata["trace"] for m in live.get_all("alice", "live", 10))
        panel = TraceReplay(live)
        panel.run = panel.runs[0]["run"]
        assert [label.split(" · ")[1].split(" (")[0] for label in panel.timeline["label"]] == [
            "agent", "chain", "tool", "llm"]
        assert panel.timeline["depth"] == [0, 1, 2, 1]


def test_a_single_leg_search_draws_a_full_bar_for_that_leg(tmp_path: Path) -> None:
    """A keyword-only hit's score is all keyword: its bar is full length, not the 3 px stub of a leg
    that found nothing."""
    from memkit.widgets._nsgrid import _memory_row

    with memkit.open(f"sqlite:///{tmp_path / 't.db'}?embedder=none") as mem:
        mem.add("EGFR knockdown in A549", "ana", "bio")
        mem.add("TP53 variant in HeLa", "ana", "bio")
        (hit,) = mem.search("EGFR", "ana", "bio", 5, mode="keyword")
        legs = _memory_row(1, hit)["legs"]
        assert [(leg["name"], leg["found"], leg["share"]) for leg in legs] == [("keyword", True, 1.0)]


def test_an_error_reads_apart_from_the_traceback_a_framework_ran_into_it() -> None:
    """LangChain records repr(e) and the traceback as one string: the detail shows them on separate
    lines, the run list's one-line cell the message only."""
    from memkit.widgets._trace_rows import error_lines, error_message

    raw = "TimeoutError('PDB did not answer for TP53')Traceback (most recent call last):\n  File \"x.py\", line 1"
    assert error_lines(raw).splitlines()[:2] == ["TimeoutError('PDB did not answer for TP53')",
                                                 "Traceback (most recent call last):"]
    assert error_message(raw) == "TimeoutError('PDB did not answer for TP53')"
    plain = "Connection reset by peer"
    assert error_lines(plain) == error_message(plain) == plain
    only = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom\n"
    assert error_lines(only) == only and error_message(only) == "ValueError: boom"  # its exception, issue 42


def test_a_traceback_reads_without_the_blank_lines_a_framework_put_between_its_frames() -> None:
    """OpenInference joins a LangChain tool's frames with blank lines; Python's own chained traceback
    has single blank lines around "The above exception...", which stay, as does every line of text."""
    import itertools
    import traceback

    from memkit.widgets._trace_rows import error_lines

    def boom() -> None:
        try:
            raise KeyError("gene")
        except KeyError as exc:
            raise TimeoutError("PDB did not answer for TP53\n\nretry later") from exc

    try:
        boom()
    except TimeoutError as exc:
        frames = traceback.format_exception(exc)
    python = "".join(frames)
    # the way OpenInference writes it: repr(e), then the frames joined by blank lines
    padded = "TimeoutError('PDB did not answer for TP53')" + "\n\n".join(frames)
    shown = error_lines(padded).splitlines()
    assert shown[0] == "TimeoutError('PDB did not answer for TP53')"
    assert shown[1:] == python.splitlines()  # exactly Python's own traceback: its blank lines, no more
    assert "" in shown and all(a or b for a, b in itertools.pairwise(shown))  # never two blank in a row
    assert error_lines(python) == python  # Python's own traceback is left as it is


class _Wire:
    """What a widget puts on its comm: the state it opens with, then each message it sends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import comm as comm_package

        self.opened: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        create = comm_package.create_comm

        def record(**kwargs: Any) -> Any:
            self.opened.append(kwargs["data"]["state"])
            made = create(**kwargs)
            monkeypatch.setattr(made, "send", lambda data=None, **_: self.sent.append(data))
            return made

        monkeypatch.setattr(comm_package, "create_comm", record)


def test_trace_replay_opens_its_comm_with_the_runs_already_read(
    demo: memkit.Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A browser drawing the panel from its first state shows the runs, not "0 of 0 runs"."""
    wire = _Wire(monkeypatch)
    panel = TraceReplay(demo)
    states = [s for s in wire.opened if s.get("_anywidget_id", "").endswith("TraceReplay")]
    assert len(states) == 1
    assert states[0]["total_runs"] == panel.total_runs == 18
    assert len(states[0]["runs"]) == 18 and states[0]["options"]["statuses"]
    assert wire.sent == []  # nothing was sent before the comm opened


def test_a_drawn_view_saying_ready_gets_the_whole_state(demo: memkit.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    wire = _Wire(monkeypatch)
    panel = TraceReplay(demo)
    panel._handle_msg({"content": {"data": {"method": "custom", "content": {"action": "ready"}}}, "buffers": []})
    updates = [m for m in wire.sent if m and m.get("method") == "update"]
    assert updates and updates[-1]["state"]["total_runs"] == 18 and len(updates[-1]["state"]["runs"]) == 18
    wire.sent.clear()
    other = {"action": "something else"}
    panel._handle_msg({"content": {"data": {"method": "custom", "content": other}}, "buffers": []})
    assert [m for m in wire.sent if m and m.get("method") == "update"] == []


def test_the_namespace_browser_counts_kinds_apart_and_tells_recalls_apart(tmp_path: Path) -> None:
    """issue 42, item 9: memories and trace steps counted apart; recall ids of one process told apart
    (they share their first 16 digits); a CSV message does not outlive its view."""
    with memkit.open(f"sqlite:///{tmp_path / 'kinds.db'}?embedder=none") as mem:
        mem.add("TP53 knockdown raises apoptosis", "alice", "bio")
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id="alice")
        for name in ("look_up", "again"):
            with history.step(name, tool="memory"):
                mem.search("TP53", "alice", "bio", mode="keyword")
        history.close()
        browser = NamespaceBrowser(mem)
        assert "1 namespaces, 1 memories and 2 trace steps" in browser.overview.value
        browser.kind.value = "recalls"
        shown = [row["short_id"] for row in browser.rows.rows]
        recalls = mem.recalls()
        assert len(shown) == len(recalls) == 2 and len(set(shown)) == 2
        assert {recall.id[:8] for recall in recalls} != set(shown)  # the first 8 digits were all alike
        browser._on_grid_message(None, {"action": "csv", "columns": [{"key": "text", "label": "query"}]}, None)
        assert browser.rows.message.startswith("CSV: ")
        browser.kind.value = "memories"
        assert browser.rows.message == ""
