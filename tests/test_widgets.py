"""The panels driven as a user would, in plain pytest: set .value, .click(), read widget state."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import memkit
from memkit._demo import demo_items
from memkit.frames import TRACE_COLUMNS, failure_patterns, traces_frame
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
    assert browser.page_label.value == "rows 1–5 of 12"
    browser.next_button.click()
    seen += _contents(browser)
    assert browser.page_label.value == "rows 6–10 of 12"
    browser.next_button.click()
    seen += _contents(browser)
    assert browser.next_button.disabled and not browser.prev_button.disabled
    assert seen == [f"note {n:02d} about {'TP53' if n % 3 == 0 else 'KRAS'}" for n in range(11, -1, -1)]
    browser.prev_button.click()
    assert browser.page_label.value == "rows 6–10 of 12"


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
def test_bad_filter_shows_a_clear_error_and_keeps_the_table(small: memkit.Memory, text: str, expected: str) -> None:
    browser = NamespaceBrowser(small, page_size=5)
    browser.namespace.value = ("u1", "bio")
    before = browser.table.value
    browser.filters.value = text
    browser.search_button.click()
    assert expected in browser.status.value
    assert "memkit-error" in browser.status.value
    assert browser.table.value == before


def test_search_offers_only_the_modes_the_store_supports_and_shows_scores(small: memkit.Memory) -> None:
    browser = NamespaceBrowser(small)
    browser.namespace.value = ("u1", "bio")
    # A new SQLite store embeds with the default model: every mode, hybrid preselected.
    assert browser.mode.options == ("keyword", "semantic", "hybrid") and browser.mode.value == "hybrid"
    browser.query.value = "TP53"
    browser.search_button.click()
    assert browser.items and all(i.score is not None for i in browser.items)
    assert {i.content for i in browser.items[:4]} == {f"note {n:02d} about TP53" for n in (0, 3, 6, 9)}
    assert "<th" in browser.table.value and ">score<" in browser.table.value
    browser.rows.value = browser.items[0].id
    assert "&quot;mode&quot;: &quot;hybrid&quot;" in browser.detail.value
    assert "&quot;rank&quot;: 1" in browser.detail.value


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
        assert "&quot;mode&quot;: &quot;keyword&quot;" in browser.detail.value


def test_memory_text_is_escaped_everywhere(small: memkit.Memory) -> None:
    small.add(HOSTILE, "u1", "bio", {"note": HOSTILE})
    browser = NamespaceBrowser(small)
    browser.namespace.value = ("u1", "bio")
    browser.rows.value = browser.items[0].id
    for html in (browser.table.value, browser.detail.value, snapshot_html(browser)):
        assert "<img" not in html and "<script>" not in html
        assert "&lt;img src=x onerror=" in html


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


def test_trace_replay_steps_through_a_run(demo: memkit.Memory, tmp_path: Path) -> None:
    replay = TraceReplay(demo)
    labels = [value for _, value in replay.workflow.options]
    assert len(labels) == 18  # 3 users x 2 runs x 3 workflows in the demo sample
    replay.workflow.value = ("alice", "bioinformatics", "variant-calling-alice-1")
    frame = replay.frame
    expected = traces_frame(demo, workflow_id="variant-calling-alice-1", agent_id="bioinformatics",
                            user_id="alice")
    pd.testing.assert_frame_equal(frame, expected)
    assert list(frame.columns[: len(TRACE_COLUMNS)]) == list(TRACE_COLUMNS)
    assert list(frame["step_index"]) == list(range(len(frame)))
    assert replay.step.max == len(frame) - 1
    for column in TRACE_COLUMNS:  # the step table shows the traces_frame columns
        assert f">{column}</th>" in replay.table.value
    assert f"step 1 of {len(frame)}: fetch_reads" in replay.step_view.value
    first = frame.iloc[0]
    for key in (k for k in frame.columns if k.startswith("params.") and pd.notna(first[k])):
        assert f"&quot;{key.split('.', 1)[1]}&quot;" in replay.step_view.value
    replay.next_button.click()
    assert "quality_check" in replay.step_view.value and replay.step.value == 1
    assert f"{frame.iloc[1]['duration_s']:.3f}".rstrip("0") in replay.step_view.value
    replay.prev_button.click()
    replay.prev_button.click()
    assert replay.step.value == 0
    replay.step.value = replay.step.max
    replay.next_button.click()
    assert replay.step.value == replay.step.max
    out = tmp_path / "steps.csv"
    replay.csv_path.value = str(out)
    replay.export_button.click()
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["step_name"] for r in rows] == list(frame["step_name"])
    assert [r["step_id"] for r in rows] == list(frame.index)
    assert set(TRACE_COLUMNS) <= set(rows[0])
    assert "wrote" in replay.status.value


def test_trace_replay_failure_patterns_and_tool_stats(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        steps = [("fetch", "entrez", "success", None), ("blast", "blast", "failed", "ConnectionError: timeout"),
                 ("blast", "blast", "failed", "network timeout"), ("blast", "blast", "success", None)]
        for index, (name, tool, status, error) in enumerate(steps):
            mem.add_trace("bio", "wf-1", {"step_name": name, "tool": tool, "status": status, "error": error,
                                          "step_index": index, "duration": 1.5, "retry_count": 0}, user_id="u1")
        replay = TraceReplay(mem)
        assert replay.workflow.value == ("u1", "bio", "wf-1")
        assert "4 steps, 2 failed" in replay.status.value
        patterns = failure_patterns(replay.frame)
        assert patterns.to_dict("records") == [{"category": "network_error", "tool": "blast", "count": 2}]
        assert ">network_error<" in replay.patterns.value and ">2<" in replay.patterns.value
        assert ">success_rate</th>" in replay.stats.value and ">0.333<" in replay.stats.value  # blast 1 of 3
        replay.step.value = 2
        assert "2 of 3 steps failed so far" in replay.step_view.value
        assert "network timeout" in replay.step_view.value


def test_trace_replay_escapes_trace_text(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 't.db'}") as mem:
        mem.add_trace("bio", "wf-<b>", {"step_name": "<b>x</b>", "tool": HOSTILE, "status": "failed",
                                         "error": HOSTILE, "parameters": {"q": HOSTILE},
                                         "result": {"r": "<i>r</i>"}}, user_id="u1")
        replay = TraceReplay(mem)
        html = replay.step_view.value + replay.table.value + replay.stats.value + replay.patterns.value
        assert "&lt;b&gt;x&lt;/b&gt;" in replay.step_view.value
        assert "<b>x</b>" not in html and "<img" not in html and "<script" not in html and "<i>r" not in html


def test_graph_explorer_caps_nodes_and_switches_scope(demo: memkit.Memory) -> None:
    explorer = GraphExplorer(demo, max_nodes=10)
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
    from typing import Any, ClassVar

    from memkit.adapters._memory import InMemoryAdapter

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
