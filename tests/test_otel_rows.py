"""SQLite's rows path for span imports (the IMPORT_STEPS capability) writes exactly what the general
path writes: every table byte for byte, ids and write times aside.

Each file is imported twice: into a store that declares the capability (steps and recalls go
straight to rows in one transaction) and into the same store class without it (a Record per step
through ``add_many``'s write, a Recall per recall through ``add_recalls``). Files: spans made by the
OTel SDK (the benchmark's shape), an OpenInference trace of a real LangGraph run, and a memkit
export holding what the rows path hands back to the general code (recall spans memkit wrote, a NUL
in a step name, a secret dict, a far-future start, retrieved documents with
metadata), written by two users sharing workflow and run ids.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memkit
from memkit._core._port import Capability
from memkit.adapters import SQLiteAdapter
from memkit.otel import _import, export_otlp, import_otlp
from memkit.traces import ExecutionHistory

pytest.importorskip("openinference.instrumentation.langchain", reason="needs memkit[dev]")

from tests.test_otel import instrumented, span_file  # noqa: F401  (the OpenInference fixtures)


class _GeneralPath(SQLiteAdapter):
    """The SQLite store without the rows path: an import builds records and Recall models."""

    capabilities = SQLiteAdapter.capabilities - {Capability.IMPORT_STEPS}


def _store(path: Path, rows: bool, embedder: object = None) -> memkit.Memory:
    adapter = (SQLiteAdapter if rows else _GeneralPath)(path, embedder=embedder)
    assert (Capability.IMPORT_STEPS in adapter.capabilities) is rows
    return memkit.Memory(adapter)


def _tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows in storage order, each memory id replaced by its place and each write time
    (memories' and trace_steps' created_us) left out."""
    with closing(sqlite3.connect(path)) as db:
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        ids = [i for (i,) in db.execute("SELECT id FROM memories ORDER BY seq")]
        times = [t for (t,) in db.execute("SELECT created_us FROM memories ORDER BY seq")]
        assert times == sorted(times)  # newest first is still the order written
        place = {memory_id: f"<memory {n}>" for n, memory_id in enumerate(ids)}

        def cell(value: Any) -> Any:
            return place.get(value, value) if isinstance(value, str) else value

        out = {}
        for name in names:
            columns = [c[1] for c in db.execute(f"PRAGMA table_info({name})")]
            rows = db.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()  # noqa: S608
            kept = []
            for row in rows:
                values = dict(zip(columns, row, strict=True))
                if name in ("memories", "trace_steps"):
                    values.pop("created_us")
                kept.append(tuple(cell(v) for v in values.values()))
            out[name] = kept
    return out


def _import_both(tmp_path: Path, source: Any, embedder: object = None, **where: str) -> dict[str, Any]:
    found = {}
    for rows in (False, True):
        path = tmp_path / f"{'rows' if rows else 'general'}.db"
        with _store(path, rows, embedder) as mem:
            report = import_otlp(mem, source, **where)
            found[rows] = (report, _tables(path))
    (general, general_tables), (fast, fast_tables) = found[False], found[True]
    assert (fast.runs, fast.steps, fast.recalls, fast.run_ids) == (
        general.runs, general.steps, general.recalls, general.run_ids)
    assert fast_tables.keys() == general_tables.keys()
    for name in general_tables:
        assert fast_tables[name] == general_tables[name], name
    return {"report": fast, "tables": fast_tables}


def _sdk_file(path: Path, spans: int) -> Path:
    from bench.otel_import import make_file

    make_file(path, spans)
    return path


def test_sdk_spans_give_the_same_tables_both_ways(tmp_path: Path) -> None:
    source = _sdk_file(tmp_path / "sdk.json", 400)
    got = _import_both(tmp_path, source, user_id="alice", agent_id="bio")
    assert got["report"].steps == 400 and got["report"].recalls > 100
    assert len(got["tables"]["trace_steps"]) == 400 and len(got["tables"]["recalls"]) == got["report"].recalls


def test_with_vectors_the_same_tables_both_ways(tmp_path: Path) -> None:
    source = _sdk_file(tmp_path / "sdk.json", 100)
    got = _import_both(tmp_path, source, embedder="default", user_id="alice", agent_id="bio")
    assert len(got["tables"]["memory_vectors"]) == 100


def test_an_openinference_langgraph_trace_gives_the_same_tables_both_ways(
    span_file: Path, tmp_path: Path  # noqa: F811
) -> None:
    got = _import_both(tmp_path, span_file)  # namespaces from the file itself
    assert got["report"].steps >= 5 and got["report"].recalls >= 1


def _odd_export(path: Path, tmp_path: Path) -> dict[str, Any]:
    """A memkit store's export holding each case the rows path leaves to the general code."""
    with memkit.open(f"sqlite:///{tmp_path}/source.db?embedder=none") as mem:
        for text in ("TP53 guards the genome", "KRAS is an oncogene", "BRCA1 repairs DNA"):
            mem.add(text, "alice", "bio")
            mem.add(text, "bob", "bio")
        for user in ("alice", "bob"):  # two users share the workflow and run ids
            history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id=user, run_id="r1")
            # A long prompt: its text is put in the metadata's slot rather than encoded twice.
            with history.step("plan", tool="llm", parameters={"q": "TP53", "prompt": "summarise ü " * 60}) as step:
                step.result = {"hits": len(mem.search("TP53 genome", user, "bio", limit=2))}
            with history.step("log\x00in", tool="db", parameters={"password": {"value": "hunter2"}, "host": "h"}):
                mem.search("oncogene", user, "bio", limit=1, filters={"source": "x"})
            mem.add_trace("bio", "wf", {"step_name": "far", "tool": "t", "timestamp": 2e11, "run_id": "r1",
                                        "retry_count": 0, "parameters": {"emoji": "🧬", "line": "a\u2028b"}}, user)
        request = export_otlp(mem)
    spans = [s for block in request["resourceSpans"] for scope in block["scopeSpans"] for s in scope["spans"]]
    for span in spans:  # a retriever of another framework, whose documents carry metadata
        if span["name"] == "far":
            span["attributes"] += [
                {"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}},
                {"key": "retrieval.documents.0.document.id", "value": {"stringValue": "d0"}},
                {"key": "retrieval.documents.0.document.metadata", "value": {"stringValue": '{"rank": 4}'}},
                {"key": "retrieval.documents.0.document.score", "value": {"intValue": "3"}},
            ]
    path.write_text(json.dumps(request))
    return request


def test_steps_and_recalls_the_rows_path_hands_back_give_the_same_tables(tmp_path: Path) -> None:
    source = tmp_path / "odd.json"
    _odd_export(source, tmp_path)
    got = _import_both(tmp_path, source)
    tables = got["tables"]
    # The cases are there: a NUL in a step's name (whole), a redacted secret, both users' recalls.
    assert "log\x00in" in {row[6] for row in tables["trace_steps"]}  # step_name (created_us left out)
    contents = [row[4] for row in tables["memories"]]
    assert any("[REDACTED]" in c for c in contents) and not any("hunter2" in c for c in contents)
    assert {row[3] for row in tables["recalls"]} == {"alice", "bob"}


def _namespace_file(path: Path) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from memkit.otel import spans_to_otlp

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("ns")
    for user in ("alice", "bob", "alice"):
        with tracer.start_as_current_span("agent", attributes={"user.id": user, "openinference.span.kind": "AGENT"}):
            attrs: dict[str, Any] = {"user.id": user, "openinference.span.kind": "RETRIEVER", "input.value": user}
            attrs["retrieval.documents.0.document.content"] = f"{user}'s private note"
            with tracer.start_as_current_span("retrieve", attributes=attrs):
                pass
    path.write_text(json.dumps(spans_to_otlp(exporter.get_finished_spans())))
    return {}


def test_namespaces_never_cross_on_the_rows_path(tmp_path: Path) -> None:
    source = tmp_path / "ns.json"
    _namespace_file(source)
    _import_both(tmp_path, source, agent_id="bio")
    with _store(tmp_path / "rows.db", rows=True) as mem:
        for user, other in (("alice", "bob"), ("bob", "alice")):
            steps = mem.get_all(user, "bio", limit=100)
            assert steps and all(m.user_id == user for m in steps)
            recalls = mem.recalls(user_id=user)
            assert recalls and all(r.user_id == user and r.trace_user_id == user for r in recalls)
            assert all(other not in h.content for r in recalls for h in r.hits)
            assert not any(other in m.content for m in mem.search(f"{other} private", user, "bio", limit=20))
        assert len(mem.recalls(user_id="alice")) == 2 and len(mem.recalls(user_id="bob")) == 1


@pytest.fixture
def unchecked_reimport(monkeypatch: pytest.MonkeyPatch) -> None:
    """import_otlp without its re-import check (which refuses before the store is reached): the
    store's own refusal of a recall id it holds, inside the import's transaction, is what is tested."""

    async def unchecked(*args: Any) -> None:
        return None

    monkeypatch.setattr(_import, "_refuse_reimport", unchecked)


@pytest.fixture
def sdk_request(tmp_path: Path) -> Iterator[dict[str, Any]]:
    yield json.loads(_sdk_file(tmp_path / "sdk.json", 100).read_text())


def _attrs(span: dict[str, Any]) -> list[dict[str, Any]]:
    attrs: list[dict[str, Any]] = span.setdefault("attributes", [])
    return attrs


@pytest.mark.parametrize(("kind", "message"), [
    ("llm", r"span \w+ \('llm'\): trace_data\['run_id'\] must be a string, got int 7"),
    ("retrieve", r"span 6\d \('retrieve'\): its recall's run_id: Input should be a valid string"),
])
def test_a_step_refused_in_the_rows_path_leaves_nothing_written(
    tmp_path: Path, sdk_request: dict[str, Any], kind: str, message: str
) -> None:
    spans = sdk_request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    # A memkit export's run id must be text: a step past the 60th span is refused while its rows are built.
    bad = next(span for span in spans[60:] if span["name"] == kind)
    _attrs(bad).extend([{"key": "memkit.workflow_id", "value": {"stringValue": "wf"}},
                        {"key": "memkit.run_id", "value": {"intValue": "7"}}])
    for rows in (True, False):
        with _store(tmp_path / f"{rows}.db", rows=rows) as mem:
            mem.add("already here", "alice", "bio")
            with pytest.raises(memkit.InvalidInputError, match=message):
                import_otlp(mem, sdk_request, user_id="alice", agent_id="bio")
            assert mem.stats().memories == 1 and mem.recalls() == []
            assert mem.get_all("alice", "bio", limit=10)[0].content == "already here"


@pytest.mark.usefixtures("unchecked_reimport")
def test_a_recall_id_held_already_takes_the_steps_back_out(tmp_path: Path, sdk_request: dict[str, Any]) -> None:
    with _store(tmp_path / "rows.db", rows=True) as mem:
        db = mem.provider._db()  # type: ignore[attr-defined]
        default = db.execute("PRAGMA cache_size").fetchone()[0]
        first = import_otlp(mem, sdk_request, user_id="alice", agent_id="bio")
        # The larger page cache an import takes is given back, after a refusal too.
        assert db.execute("PRAGMA cache_size").fetchone()[0] == default == -2000
        # Recall ids come from the spans: the same file again clashes on them after its steps.
        with pytest.raises(memkit.InvalidInputError, match="a recall with one of these ids already exists"):
            import_otlp(mem, sdk_request, user_id="alice", agent_id="bio")
        assert db.execute("PRAGMA cache_size").fetchone()[0] == default
        assert mem.stats().memories == first.steps and len(mem.recalls()) == first.recalls
        with closing(sqlite3.connect(tmp_path / "rows.db")) as db:
            assert db.execute("SELECT count(*) FROM trace_steps").fetchone()[0] == first.steps


@pytest.mark.usefixtures("unchecked_reimport")
def test_an_import_copies_its_pages_into_the_file_after_it_returns(
    tmp_path: Path, sdk_request: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's automatic checkpoint would copy the whole import from the WAL into the file inside the
    # commit; the store's writer thread does it once the import has returned, and the connection's
    # automatic checkpoints are back on (after a refused import too).
    sizes: list[int] = []
    path = tmp_path / "rows.db"
    checkpoint = SQLiteAdapter._checkpoint

    def spied(self: SQLiteAdapter) -> None:
        sizes.append(path.stat().st_size)
        checkpoint(self)
        sizes.append(path.stat().st_size)

    monkeypatch.setattr(SQLiteAdapter, "_checkpoint", spied)
    with _store(path, rows=True) as mem:
        db = mem.provider._db()  # type: ignore[attr-defined]
        db.execute("PRAGMA wal_autocheckpoint = 10")  # pages: the import's WAL holds many more
        before = path.stat().st_size
        first = import_otlp(mem, sdk_request, user_id="alice", agent_id="bio")
        assert mem.stats().memories == first.steps  # a call queued behind the checkpoint
        assert sizes[0] == before < sizes[1]  # the import's pages were all in the WAL until then
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10
        with pytest.raises(memkit.InvalidInputError, match="a recall with one of these ids already exists"):
            import_otlp(mem, sdk_request, user_id="alice", agent_id="bio")
        assert mem.stats().memories == first.steps  # queued behind the refused import's checkpoint
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10 and len(sizes) == 4


_ODD_TEXT = st.sampled_from(["\x00memkit.parameters", "\x00memkit.result", "x", "\u2028", "🧬"])


# The step data as the import built it before it was built key by key: the spec the faster one keeps.
def _old_step_of(span: Any, index: int, parent_index: int | None) -> dict[str, Any]:
    a = span.attrs
    tool = a.get("tool.name") or a.get("gen_ai.tool.name")
    data: dict[str, Any] = {
        "step_name": span.name,
        "tool": str(tool) if tool is not None else span.kind.lower(),
        "status": a.get("memkit.status") if isinstance(a.get("memkit.status"), str)
        else ("failed" if span.error is not None else "success"),
        "error": span.error,
        "timestamp": span.start_ns / 1e9,
        "duration": (span.end_ns - span.start_ns) / 1e9,
        "parameters": _import._json_or_text(a.get("input.value")),
        "result": _import._json_or_text(a.get("output.value")),
        "retry_count": a.get("memkit.retry_count") if isinstance(a.get("memkit.retry_count"), int) else 0,
        "step_index": index,
        # A memkit export says its run (None included); a foreign trace's run is the trace.
        "run_id": a.get("memkit.run_id") if "memkit.workflow_id" in a else span.trace_id,
        "span_kind": span.kind,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent,
        "parent_step_index": parent_index,
    }
    if isinstance(a.get("memkit.retry_errors"), str):
        data["retry_errors"] = json.loads(a["memkit.retry_errors"])
    model = a.get("llm.model_name") or a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
    if model is not None:
        data["model"] = str(model)
    tokens = {k: a[k] for k in ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total",
                                "llm.cost.total", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
                                "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens") if k in a}
    if tokens:
        data["tokens"] = tokens
    return {k: v for k, v in data.items() if v is not None}


def test_a_steps_data_keeps_the_keys_values_and_order_it_had(tmp_path: Path) -> None:
    source = tmp_path / "odd.json"
    request = _odd_export(source, tmp_path)
    _attrs(request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]).extend([
        {"key": "memkit.retry_errors", "value": {"stringValue": "null"}},
        {"key": "memkit.retry_count", "value": {"boolValue": True}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
        {"key": "memkit.status", "value": {"stringValue": "skipped"}},
    ])
    spans = _import._parse(request) + _import._parse(json.loads(_sdk_file(tmp_path / "sdk.json", 100).read_text()))
    for n, span in enumerate(spans):
        for index, parent in ((n, None), (0, n - 1)):
            assert json.dumps(_import._step_of(span, index, parent)) == json.dumps(_old_step_of(span, index, parent))


def test_ids_checked_for_the_step_before_are_still_held_to_the_limits_given() -> None:
    from memkit._core._records import trace_record, trace_row

    step = {"step_name": "s", "tool": "t", "timestamp": 1.7e9, "duration": 0.5}
    long_user = "u" * 100
    assert trace_row("bio", "wf", step, long_user, memkit.Limits()) is not None  # now remembered
    for user, workflow, agent in ((long_user, "wf", "bio"), ("u", "w" * 100, "bio"), ("u", "wf", "b" * 100)):
        with pytest.raises(memkit.InvalidInputError, match="is 100 characters; the limit is 50"):
            trace_record(agent, workflow, step, user, memkit.Limits(max_id_chars=50))
    # A bad id after a good one with the same limits is still refused.
    trace_row("bio", "wf", step, "u", memkit.Limits())
    with pytest.raises(memkit.InvalidInputError, match="user_id must not contain control characters"):
        trace_record("bio", "wf", step, "u\x07", memkit.Limits())


# Floats of every magnitude, the tiny ones among them.
_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [6.4e-05, -8.372e-06, 1e-4, 9.999999999999999e-05, 5e-324, -0.0, 1e16, 1.7976931348623157e308, 1795693267.97])
_plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _floats | st.text(max_size=5) | _ODD_TEXT
    | st.sampled_from(["\x00memkit.timestamp", "\x00memkit.duration", "\x00\x1f\x7f\"\\\n\u2028"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | _ODD_TEXT, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(step=st.dictionaries(st.sampled_from(["step_name", "tool", "q", "timestamp", "duration", "parameters",
                                              "result", "metadata", "tokens", "duration_ms", "x"]), _plain, max_size=7),
       timestamp=st.none() | _floats, duration=st.none() | _floats)
def test_a_trace_rows_texts_are_json_dumps_whichever_encoder_wrote_them(
    step: dict[str, Any], timestamp: float | None, duration: float | None
) -> None:
    """The content's data is json.dumps(sort_keys=True) of the payload, the metadata and the objects
    json.dumps's compact text: tiny floats at any depth and odd characters included."""
    from memkit._core._records import trace_row

    if timestamp is not None:
        step["timestamp"] = timestamp
    if duration is not None:
        step["duration"] = duration
    for key in ("parameters", "result", "metadata"):
        if key in step and not isinstance(step[key], dict):
            step[key] = {"value": step[key]}
    row = trace_row("bio", "wf", step, "alice", memkit.Limits(max_metadata_bytes=10**6))
    if row is None:  # a number where a text belongs: the general path says so
        return
    meta = row[6]
    data = json.dumps(meta["trace"], ensure_ascii=False, sort_keys=True)
    assert row[3] == f"[trace] workflow=wf agent=bio data={data}"
    assert row[4] == json.dumps(meta, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(row[4]) == meta
    for text, key in zip(row[7:], ("parameters", "result"), strict=True):
        value = meta["trace"].get(key)
        assert text == (json.dumps(value, ensure_ascii=False, separators=(",", ":")) if type(value) is dict else "null")
