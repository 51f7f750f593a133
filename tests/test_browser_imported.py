"""A trace recorded by another framework, in TraceReplay, as a researcher sees it: real JupyterLab, real Chromium.

The span file is made here the way an instrumented agent makes one: OpenInference's LangChain
instrumentation traces a real LangGraph graph (retriever with two documents, a planning LLM, a tool
that calls an LLM, a tool that times out) under an agent span opened with the OTel SDK, and the SDK's
spans are written as OTLP JSON. ``memkit.otel.import_otlp`` imports the file into a SQLite file and
into a real PostgreSQL; a notebook opens TraceReplay on each store. The test reads what is drawn:
the tree nested five deep (indentation, carets), the failed tool red, the retriever's documents as
the step's recalls, the parents' rolled-up time, and a caret folding its children away and back.
Screenshots: .artifacts/lab-imported-{sqlite,postgres}{,-folded,-recall,-error}.png.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import nbformat
import pytest
from playwright.sync_api import Browser, Locator, Page
from test_browser import ARTIFACTS, _guarded_page, _pwned, browser  # noqa: F401
from test_browser_graph import _run_all, lab, pytestmark  # noqa: F401

import memkit

pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")
pytest.importorskip("openinference.instrumentation.langchain", reason="needs memkit[dev]")

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memkit.otel import import_otlp, spans_to_otlp

QUESTION = "which gene is mutated in cancers?"
DOCUMENTS = ["TP53 is mutated in half of all cancers", "KRAS drives pancreatic cancer"]
# The tree the agent below makes, parents before children: (step name, depth).
TREE = [("triage_agent", 0), ("LangGraph", 1), ("retrieve", 2), ("papers", 3), ("think", 2), ("planner", 3),
        ("lookup_gene", 3), ("summarise", 4), ("fetch_structure", 3)]
RED, GREEN = "rgb(198, 40, 40)", "rgb(46, 125, 50)"


class _Papers(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=text, id=f"paper-{n}") for n, text in enumerate(DOCUMENTS, start=1)]


_summariser = FakeListChatModel(responses=["TP53 guards the genome"], name="summarise")
# The planner answers as a provider's chat model does: a model name among its parameters and the
# usage on its message, which OpenInference records as llm.model_name and llm.token_count.*.
PLANNER_MODEL, PLANNER_USAGE = "fake-planner-1", {"input_tokens": 31, "output_tokens": 4, "total_tokens": 35}


class _Planner(GenericFakeChatModel):
    model_name: str = PLANNER_MODEL


@tool
def lookup_gene(symbol: str) -> str:
    """Look a gene up and summarise what is known (a tool that calls an LLM)."""
    time.sleep(0.2)
    return str(_summariser.invoke(f"summarise {symbol}").content)


@tool
def fetch_structure(symbol: str) -> str:
    """Fetch a protein structure (the remote side never answers)."""
    time.sleep(0.1)
    raise TimeoutError(f"PDB did not answer for {symbol}")


class _State(TypedDict):
    question: str
    docs: list[str]
    answer: str


def _graph() -> Any:
    papers = _Papers(name="papers")
    planner = _Planner(messages=iter([AIMessage(content="TP53", usage_metadata=PLANNER_USAGE)]), name="planner")  # type: ignore[arg-type]

    def retrieve(state: _State) -> dict[str, Any]:
        return {"docs": [d.page_content for d in papers.invoke(state["question"])]}

    def think(state: _State) -> dict[str, Any]:
        gene = str(planner.invoke(state["question"]).content)
        answer = lookup_gene.invoke({"symbol": gene})
        with contextlib.suppress(TimeoutError):  # the agent carries on; the span keeps the failure
            fetch_structure.invoke({"symbol": gene})
        return {"answer": answer}

    builder = StateGraph(_State)
    builder.add_node("retrieve", retrieve)
    builder.add_node("think", think)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "think")
    builder.add_edge("think", END)
    return builder.compile()


@pytest.fixture(scope="module")
def span_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One agent run as OTLP JSON: an SDK agent span around an OpenInference-traced LangGraph run."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        tracer = provider.get_tracer("triage-agent")
        with tracer.start_as_current_span("triage_agent", attributes={"openinference.span.kind": "AGENT",
                                                                      "input.value": QUESTION}):
            _graph().invoke({"question": QUESTION, "docs": [], "answer": ""})
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    # The file is the tree TREE describes: what the browser must show is what the frameworks recorded.
    by_id = {s.context.span_id: s for s in spans}

    def depth(span: Any) -> int:
        return 0 if span.parent is None else 1 + depth(by_id[span.parent.span_id])

    assert sorted((s.name, depth(s)) for s in spans) == sorted(TREE)
    kinds = {s.name: (s.attributes or {}).get("openinference.span.kind") for s in spans}
    assert [kinds[n] for n in ("triage_agent", "think", "fetch_structure", "summarise", "papers")] == \
        ["AGENT", "CHAIN", "TOOL", "LLM", "RETRIEVER"]
    assert [s.status.status_code.name for s in spans if s.name == "fetch_structure"] == ["ERROR"]
    path = tmp_path_factory.mktemp("spans") / "agent.otlp.json"
    path.write_text(json.dumps(spans_to_otlp(spans)))
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, lab: tuple[str, Path]) -> tuple[str, str]:  # noqa: F811
    """(name, store URL): a SQLite file in the notebook's folder, or a database on the session's PostgreSQL."""
    if request.param == "sqlite":
        return "sqlite", f"sqlite:///{lab[1] / 'imported.db'}?embedder=none"
    server = request.getfixturevalue("postgres_server")
    return "postgres", server.url("lab_imported") + "?embedder=none"


def _notebook(root: Path, url: str) -> None:
    cells = [
        f"import json\nimport memkit\nfrom memkit.widgets import TraceReplay\nmem = memkit.open({url!r})\n"
        "panel = TraceReplay(mem)\npanel.run = panel.runs[0]['run']\npanel",
        "print('rolled:', json.dumps(panel.timeline['rolled']))",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "imported.ipynb")


@pytest.fixture
def imported(span_file: Path, backend: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """The span file imported into the backend's store, empty before; the store emptied after."""
    name, url = backend
    with memkit.open(url) as mem:
        mem.reset()
        report = import_otlp(mem, span_file, user_id="alice", agent_id="bio-agent", workflow_id="triage")
        assert (report.runs, report.steps, report.recalls) == (1, len(TREE), 1)
    yield name, url
    with memkit.open(url) as mem:
        mem.reset()


def test_an_imported_nested_trace_in_jupyterlab(browser: Browser, lab: tuple[str, Path],  # noqa: F811
                                                imported: tuple[str, str]) -> None:
    url, root = lab
    name, store = imported
    _notebook(root, store)
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.set_viewport_size({"width": 1400, "height": 1000})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url.replace("graph.ipynb", "imported.ipynb"))
    try:
        _look(page, f"lab-imported-{name}")
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"lab-imported-{name}-failed.png"), full_page=True)
        raise
    assert _pwned(page) == [None] * len(page.frames)
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert outside == []


def _row(timeline: Locator, name: str) -> Locator:
    # A label reads "6 · lookup_gene" or "3 · papers (retriever)": the step number, the name, the kind.
    label = re.compile(rf"^\d+ · {re.escape(name)}( \(|$)")
    return timeline.locator(".mk-tl-inner .mk-tl-row").filter(has=timeline.page.locator(".mk-tl-name", has_text=label))


def _x(row: Locator) -> float:
    """Where the step's name starts, in pixels from the left of the page."""
    box = row.locator(".mk-tl-name").bounding_box()
    assert box is not None
    return float(box["x"])


def _shown(page: Page, count: int) -> None:
    page.wait_for_function(
        "(n) => document.querySelectorAll('.memkit-traces .mk-tl-inner .mk-tl-row').length === n", arg=count)


def _look(page: Page, shot: str) -> None:
    timeline = page.locator(".memkit-traces .mk-timeline").first
    _row(timeline, "fetch_structure").wait_for(timeout=90_000)
    rows = timeline.locator(".mk-tl-inner .mk-tl-row")
    labels = rows.locator(".mk-tl-name").all_inner_texts()
    assert [re.sub(r"^\d+ · | \(\w+\)$", "", t) for t in labels] == [n for n, _ in TREE]  # parents above children
    assert [int(d or -1) for d in rows.evaluate_all("rs => rs.map(r => r.dataset.depth)")] == [d for _, d in TREE]
    row = {n: _row(timeline, n) for n, _ in TREE}
    # One indentation step per level, the same for every row at a level, whatever its parent.
    x = {n: _x(row[n]) for n, _ in TREE}
    step = x["LangGraph"] - x["triage_agent"]
    assert step > 5
    for n, d in TREE:
        assert x[n] == pytest.approx(x["triage_agent"] + d * step, abs=0.5), n
    # Every name reads whole, the deepest too (a label cut short ends in an ellipsis).
    names = rows.locator(".mk-tl-name")
    assert names.evaluate_all("ns => ns.filter(n => n.scrollWidth > n.clientWidth).map(n => n.textContent)") == []
    # The time axis above them: tick labels apart, none running into the next.
    ticks = timeline.locator(".mk-tl-head .mk-tick").evaluate_all(
        "ts => ts.filter(t => t.textContent && getComputedStyle(t).visibility !== 'hidden')"
        ".map(t => t.getBoundingClientRect()).map(r => [r.left, r.right])")
    assert len(ticks) >= 3 and all(a[1] + 4 <= b[0] for a, b in itertools.pairwise(ticks)), ticks
    # A caret on every parent, open; none on a leaf.
    for n in ("triage_agent", "LangGraph", "retrieve", "think", "lookup_gene"):
        assert row[n].locator(".mk-caret").get_attribute("aria-expanded") == "true", n
    for n in ("papers", "planner", "summarise", "fetch_structure"):
        assert row[n].locator(".mk-caret[aria-expanded]").count() == 0, n
    # The tool that timed out is red; the others green.
    bar = row["fetch_structure"].locator(".mk-bar")
    assert bar.get_attribute("data-status") == "failed"
    assert bar.evaluate("b => getComputedStyle(b).backgroundColor") == RED
    for n in ("lookup_gene", "summarise", "papers", "think"):
        assert row[n].locator(".mk-bar").evaluate("b => getComputedStyle(b).backgroundColor") == GREEN, n
    # Parents show their children's rolled-up time as the kernel computed it; leaves none. The
    # planner's children slept 0.2 s (lookup_gene) and 0.1 s (fetch_structure).
    page.get_by_text("rolled: [").wait_for(timeout=60_000)
    printed = page.locator(".jp-OutputArea-output").filter(has_text="rolled: [").inner_text()
    rolled = json.loads(printed.split("rolled: ", 1)[1])
    for k, (n, _) in enumerate(TREE):
        if rolled[k]:
            assert row[n].locator(".mk-rollup").inner_text() == f"Σ {rolled[k]}", n
        else:
            assert row[n].locator(".mk-rollup").count() == 0, n
    assert all(rolled[k] for k, (n, _) in enumerate(TREE) if n in ("triage_agent", "LangGraph", "think"))
    think, unit = rolled[[n for n, _ in TREE].index("think")].split()
    assert float(think) * (1000 if unit == "s" else 1) >= 300, (think, unit)
    # The retriever carries its recall mark; nothing else searched.
    assert row["papers"].locator(".mk-recall-mark").inner_text() == "1"
    assert timeline.locator(".mk-tl-inner .mk-recall-mark").count() == 1
    _runs_fit(page)
    page.locator(".memkit-traces").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), clip=_clip(page))
    # The retriever's step: its query and both documents, best first, as what the step recalled.
    row["papers"].click()
    detail = page.locator(".memkit-traces .mk-detail")
    detail.locator(".mk-title").filter(has_text="papers").wait_for(timeout=30_000)
    # the outside retriever's documents are named as such, not as memories this store recalled
    detail.locator(".mk-recalled .mk-section").filter(has_text="retrieved 2 documents").wait_for(timeout=30_000)
    assert "memor" not in detail.locator(".mk-recalled .mk-section").inner_text()
    assert detail.locator(".mk-hits th").last.inner_text() == "document (as retrieved)"
    assert detail.locator(".mk-recalled .mk-query").inner_text() == QUESTION
    # They are the agent's own documents, not memories deleted from the store: marked as such, not struck out.
    hits = detail.locator(".mk-hits .mk-hit-text .mk-clamp")
    assert [t.removeprefix("document") for t in hits.all_inner_texts()] == DOCUMENTS
    assert hits.locator(".mk-external").all_inner_texts() == ["document", "document"]
    assert detail.locator(".mk-deleted, .mk-hit-deleted").count() == 0
    assert hits.first.evaluate("c => getComputedStyle(c).textDecorationLine") == "none"
    hits.first.click()
    opened = detail.locator(".mk-memory")
    opened.locator(".mk-title").filter(has_text="from the agent's retriever").wait_for(timeout=30_000)
    assert "not a memory in this store" in opened.locator(".mk-note").inner_text()
    assert opened.locator(".mk-memory-text").inner_text() == DOCUMENTS[0]
    page.screenshot(path=str(ARTIFACTS / f"{shot}-recall.png"), clip=_clip(page))
    # The failed tool's step says why.
    row["fetch_structure"].click()
    detail.locator(".mk-title").filter(has_text="fetch_structure").wait_for(timeout=30_000)
    error = detail.locator(".mk-error").inner_text()
    # LangChain records repr(e) and the traceback as one string: the message and the traceback read apart
    assert error.splitlines()[0] == "TimeoutError('PDB did not answer for TP53')", error
    assert error.splitlines()[1] == "Traceback (most recent call last):", error
    # ... and the traceback as Python printed it: LangChain's blank lines between the frames are gone,
    # every frame and the exception line are there, as text
    lines = error.splitlines()
    assert "" not in lines, error
    frames = [n for n, line in enumerate(lines) if line.startswith('  File "')]
    assert frames and frames[0] == 2 and 'test_browser_imported.py", line' in lines[frames[-1]], error
    assert all(lines[n + 1].startswith("    ") for n in frames), error  # each frame's code right under it
    assert lines[-1] == "TimeoutError: PDB did not answer for TP53", error
    # the message, then the traceback in one text node (no markup from the error), each line whole:
    # a frame's path and its caret line are never broken across screen lines
    assert detail.locator(".mk-error *").count() == 1
    traceback = detail.locator(".mk-error .mk-traceback")
    assert traceback.inner_text().splitlines() == lines[1:]
    shown = traceback.evaluate("s => { const r = document.createRange(); r.selectNodeContents(s);"
                               " return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size; }")
    assert shown == len(lines) - 1, (shown, error)
    # the run list's cell: the message only, the whole error on hover
    first_error = page.locator(".memkit-traces td.mk-col-first_error").first
    assert first_error.inner_text() == "TimeoutError('PDB did not answer for TP53')"
    assert first_error.get_attribute("title") == error
    page.screenshot(path=str(ARTIFACTS / f"{shot}-error.png"), clip=_clip(page))
    # The LLM call: its model and tokens (and the run's total, which only it reports), what it was asked
    # and what it answered, as the instrumentation recorded them.
    row["planner"].click()
    detail.locator(".mk-title").filter(has_text="planner").wait_for(timeout=30_000)
    facts = detail.locator(".mk-facts").first
    assert PLANNER_MODEL in facts.inner_text()
    assert "35 tokens (31 in / 4 out)" in facts.inner_text()
    assert "35 tokens" in page.locator(".memkit-traces .mk-timeline .mk-usage").inner_text()
    shown = detail.inner_text()
    assert QUESTION in shown and "TP53" in shown
    page.screenshot(path=str(ARTIFACTS / f"{shot}-llm.png"), clip=_clip(page))
    # Folding the chain hides its four descendants (the tool's LLM too); folding the retriever's chain
    # moves the folded chain up a row; unfolding brings every row back; folding the root leaves one.
    tops = {n: row[n].bounding_box()["y"] for n, _ in TREE}  # type: ignore[index]
    row["think"].locator(".mk-caret").click()
    _shown(page, 5)
    for n in ("planner", "lookup_gene", "summarise", "fetch_structure"):
        assert row[n].count() == 0, n
    assert row["think"].locator(".mk-caret").get_attribute("aria-expanded") == "false"
    # The folded chain still says a step under it failed, in the failed colour.
    folded_failure = row["think"].locator(".mk-failed-below")
    assert folded_failure.inner_text() == "✕1"
    assert folded_failure.evaluate("b => getComputedStyle(b).backgroundColor") == RED
    assert timeline.locator(".mk-failed-below").count() == 1
    assert row["think"].bounding_box()["y"] == tops["think"]  # type: ignore[index]
    page.screenshot(path=str(ARTIFACTS / f"{shot}-folded.png"), clip=_clip(page))
    row["retrieve"].locator(".mk-caret").click()
    _shown(page, 4)
    assert row["retrieve"].locator(".mk-failed-below").count() == 0  # nothing failed under the retriever
    assert row["think"].bounding_box()["y"] == tops["papers"]  # type: ignore[index]  # moved up one row
    row["retrieve"].locator(".mk-caret").click()
    row["think"].locator(".mk-caret").click()
    _shown(page, len(TREE))
    assert row["summarise"].is_visible() and _x(row["summarise"]) == pytest.approx(x["summarise"], abs=0.5)
    assert timeline.locator(".mk-failed-below").count() == 0  # shown again, the failure is its own red row
    row["triage_agent"].locator(".mk-caret").click()
    _shown(page, 1)
    assert row["triage_agent"].locator(".mk-failed-below").inner_text() == "✕1"


def _runs_fit(page: Page) -> None:
    """The run list ends inside the output cell on this 1,400 px page: no column past its right edge,
    nothing to scroll sideways, every header whole, and a cell cut short has its whole text on hover."""
    panel = page.locator(".memkit-traces").first
    area = page.locator(".jp-OutputArea-output").filter(has=panel).bounding_box()
    table = panel.locator(".mk-runs table.mk-grid").bounding_box()
    assert area is not None and table is not None
    assert table["x"] + table["width"] <= area["x"] + area["width"] + 1, (table, area)
    assert panel.locator(".mk-runs .mk-grid-wrap").evaluate("w => w.scrollWidth <= w.clientWidth + 1")
    heads = panel.locator(".mk-runs thead th")
    assert heads.count() == 15  # every column is there (tokens, cost and model too): none dropped to make room
    for head in heads.all():
        box = head.bounding_box()
        assert box is not None and box["x"] + box["width"] <= area["x"] + area["width"] + 1, (head.inner_text(), box)
        widths = heads.evaluate_all("hs => hs.map((h) => [h.textContent, h.clientWidth, h.scrollWidth])")
        assert head.evaluate("th => th.scrollWidth <= th.clientWidth"), f"{head.inner_text()}: {widths}"
    cut = panel.locator(".mk-runs tbody td").evaluate_all(
        "tds => tds.filter((td) => td.scrollWidth > td.clientWidth + 1)"
        ".map((td) => [td.className, td.textContent, td.title])")
    assert all(full.startswith(text.removesuffix("…")) for _, text, full in cut), cut
    assert any(c[0] == "mk-col-run_id" for c in cut), cut  # the trace's long id is cut here, whole on hover
    # the start time reads as the date over the time, two lines at most
    lines = panel.locator(".mk-runs tbody td.mk-col-started").first.evaluate(
        "td => { const r = document.createRange(); r.selectNodeContents(td);"
        " return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size; }")
    assert lines <= 2, lines


def _clip(page: Page) -> dict[str, float]:
    box = page.locator(".memkit-traces").first.bounding_box()
    assert box is not None
    return {"x": box["x"], "y": max(box["y"], 0), "width": box["width"], "height": min(box["height"], 900)}
