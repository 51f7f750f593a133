"""A big span file is read, checked and planned by a second process while the store builds the rows
(memkit.otel._stream): it writes exactly what the import in one process writes, and refuses exactly
the files it refuses, with the same first error and nothing written.

Every test lowers the size from which a file streams to 0, and the steps a message carries and the
steps the store writes at a time to a handful, so that messages end inside traces and many chunks
are written (in the import's one transaction) before the file's end; each file is imported both ways
into real SQLite files and every table is compared byte for byte (ids and write times aside).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memkit
from memkit._core._validate import DEFAULT_LIMITS
from memkit.adapters import SQLiteAdapter
from memkit.adapters._sqlite import _step_rows
from memkit.adapters._sqlite._vectors import Vectors
from memkit.otel import _child, _incremental, _stream, export_otlp, import_otlp
from memkit.otel._convert import _walk
from memkit.otel._plan import _json_or_text
from memkit.otel._spans import _load
from memkit.store._ops import StepsRestarted
from memkit.traces import ExecutionHistory, Redactor, set_trace_redactor
from tests.test_graph_vector import HashEmbedder  # an embedder of the caller's own
from tests.test_otel_rows import _odd_export, _sdk_file, _tables, unchecked_reimport  # noqa: F401

_STREAM_MIN_BYTES = _stream.STREAM_MIN_BYTES  # before the fixture below lowers it


class _Spy(_stream.StepStream):
    """StepStream, remembering each one made, whether it ran to the end and how often it started over."""

    made: ClassVar[list[_Spy]] = []

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.restarts = 0
        _Spy.made.append(self)

    def __iter__(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        try:
            yield from super().__iter__()
        except StepsRestarted:
            self.restarts += 1
            raise


_INSERTED: list[int] = []  # the steps of each chunk the store inserted, in order


def _counted(db: sqlite3.Connection, rows: Any, *args: Any) -> None:
    _INSERTED.append(len(rows))
    _insert_memories(db, rows, *args)


_insert_memories = _step_rows.insert_memories


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(_stream, "_cores", lambda: 2)
    monkeypatch.setattr(_stream, "_load", lambda: 0.3)  # a core free, whatever the machine's load
    monkeypatch.setattr(_stream, "_CHUNK", 7)
    monkeypatch.setattr(_stream, "StepStream", _Spy)
    monkeypatch.setattr(_step_rows, "_CHUNK", 5)
    monkeypatch.setattr(_step_rows, "insert_memories", _counted)
    _Spy.made = []
    _INSERTED.clear()
    yield


def _import(
    path: Path, source: Any, streamed: bool, monkeypatch: pytest.MonkeyPatch, embedder: Any = None, **where: str
) -> Any:
    _INSERTED.clear()
    with monkeypatch.context() as patch:
        if not streamed:
            patch.setattr(_stream, "STREAM_MIN_BYTES", 1 << 62)
        with memkit.Memory(SQLiteAdapter(path, embedder=embedder)) as mem:
            return import_otlp(mem, source, **where)


def _both(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any = None, **where: str
) -> dict[str, Any]:
    """Import ``source`` in one process and streamed (into a store with ``embedder``, by default
    keyword-only); the same report and tables, which are returned."""
    one = _import(tmp_path / "one.db", source, False, monkeypatch, embedder, **where)
    assert _Spy.made == []
    two = _import(tmp_path / "two.db", source, True, monkeypatch, embedder, **where)
    assert len(_Spy.made) == 1
    assert (two.runs, two.steps, two.recalls, two.run_ids, two.memories) == (
        one.runs, one.steps, one.recalls, one.run_ids, one.memories)
    first, second = _tables(tmp_path / "one.db"), _tables(tmp_path / "two.db")
    assert first.keys() == second.keys()
    for name in first:
        assert second[name] == first[name], name
    return {"report": two, "tables": second, "stream": _Spy.made[0]}


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def test_sdk_spans_streamed_give_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _sdk_file(tmp_path / "sdk.json", 400)
    got = _both(tmp_path, source, monkeypatch, user_id="alice", agent_id="bio")
    assert got["report"].steps == 400 and got["report"].recalls > 100
    stream = got["stream"]
    assert stream.runs is not None and stream.restarts == 0 and len(stream.steps) == 400  # streamed, no fallback


@pytest.mark.parametrize("redactor", ["memkit's, own keys", "none", "a function"])
def test_the_child_builds_rows_as_this_process_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redactor: str
) -> None:
    hook = {"memkit's, own keys": Redactor(patterns=[r"^model$"]), "none": None,
            "a function": lambda data: {**data, "model": "hidden"}}[redactor]  # a lambda: cannot be pickled
    monkeypatch.setattr(_stream, "ROWS_BEHIND", 0)  # this process taken as behind all along: every row
    previous = set_trace_redactor(hook)
    try:
        got = _both(tmp_path, _sdk_file(tmp_path / "sdk.json", 200), monkeypatch, user_id="alice", agent_id="bio")
    finally:
        set_trace_redactor(previous)
    built = sum(row is not None for row in got["stream"].built)
    # The child builds the rows with this process's redactor; never with one it cannot have.
    assert built == 200 if redactor != "a function" else built == 0
    contents = " ".join(str(row) for row in got["tables"]["memories"])
    assert "gpt-x" not in contents if redactor != "none" else "gpt-x" in contents


def test_the_child_builds_the_rows_of_the_chunks_it_plans_while_this_process_is_behind(tmp_path: Path) -> None:
    source = _sdk_file(tmp_path / "sdk.json", 400)
    behind = iter([False, True, True, False] * 20)  # what the child's sender says before each chunk
    sent: list[tuple[str, Any]] = []
    _child._plan_file(str(source), "alice", "bio", None, 10, lambda kind, payload=None: sent.append((kind, payload)),
                      DEFAULT_LIMITS, lambda: next(behind))
    chunks = [payload for kind, payload in sent if kind == "steps"]
    assert [kind for kind, _ in sent[-1:]] == ["done"] and len(chunks) >= 6
    pattern = [False, True, True, False]
    assert [rows is not None for _, _, rows in chunks] == [pattern[i % 4] for i in range(len(chunks))]
    for steps, _, rows in chunks:
        if rows is not None:
            assert [row[0] for row in rows] != [] and len(rows) == len(steps)
            assert all(row is not None and row[1:3] == ("alice", "bio") for row in rows)
    # Without limits (a redactor this process cannot hand over) no chunk has rows, behind or not.
    sent.clear()
    _child._plan_file(str(source), "alice", "bio", None, 10, lambda kind, payload=None: sent.append((kind, payload)),
                      None, lambda: True)
    assert all(payload[2] is None for kind, payload in sent if kind == "steps")


def test_interleaved_traces_start_over_and_give_the_same_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = json.loads(_sdk_file(tmp_path / "sdk.json", 300).read_text())
    spans = _spans(request)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["traceId"], []).append(span)
    # Concurrent agents: the traces' spans taken in turn, as a batch exporter writes them.
    spans[:] = [s for n in range(max(map(len, by_trace.values()))) for t in by_trace.values() for s in t[n:n + 1]]
    source = tmp_path / "interleaved.json"
    source.write_text(json.dumps(request))
    got = _both(tmp_path, source, monkeypatch, user_id="alice", agent_id="bio")
    assert got["stream"].restarts == 1 and got["stream"].runs is not None


def test_a_late_span_of_the_first_trace_rolls_back_what_was_written_and_writes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = json.loads(_sdk_file(tmp_path / "sdk.json", 300).read_text())
    spans = _spans(request)
    first = spans[0]["traceId"]
    late = next(s for s in spans[1:] if s["traceId"] == first and s.get("parentSpanId"))
    spans.remove(late)
    spans.append(late)  # the first trace's steps were planned and sent without it long before
    source = tmp_path / "late.json"
    source.write_text(json.dumps(request))
    got = _both(tmp_path, source, monkeypatch, user_id="alice", agent_id="bio")
    assert got["stream"].restarts == 1 and got["stream"].runs is not None
    # Chunks were written before the child started over: rolled back, then all written again.
    assert sum(_INSERTED) > got["report"].steps + 100 and got["report"].steps == len(got["tables"]["memories"])


def test_json_lines_whose_traces_go_on_across_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = json.loads(_sdk_file(tmp_path / "sdk.json", 200).read_text())
    spans = _spans(request)
    head, tail = json.loads(json.dumps(request)), json.loads(json.dumps(request))
    _spans(head)[:] = spans[:77]  # line 2 starts in the middle of the second trace
    _spans(tail)[:] = spans[77:]
    source = tmp_path / "lines.jsonl"
    source.write_text(json.dumps(head) + "\n" + json.dumps(tail) + "\n")
    got = _both(tmp_path, source, monkeypatch)
    assert got["report"].steps == 200 and got["stream"].restarts == 0 and got["stream"].runs is not None


def test_a_memkit_export_by_two_users_streamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "odd.json"
    _odd_export(source, tmp_path)
    got = _both(tmp_path, source, monkeypatch)  # namespaces from the file itself
    assert {row[3] for row in got["tables"]["recalls"]} == {"alice", "bob"}
    assert got["stream"].runs is not None
    with memkit.open(f"sqlite:///{tmp_path}/two.db?embedder=none") as mem:
        for user, other in (("alice", "bob"), ("bob", "alice")):
            steps = mem.get_all(user, "bio", limit=100)
            assert steps and all(m.user_id == user for m in steps)
            assert all(r.user_id == user and r.trace_user_id == user for r in mem.recalls(user_id=user))
            assert not any(m.user_id == other for m in steps)


def test_rows_the_child_builds_carry_the_trace_steps_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The store's row maker: every step crosses as its columns and trace_steps fields (no metadata to
    # pickle), a NUL in a step's name included.
    source = tmp_path / "odd.json"
    _odd_export(source, tmp_path)
    monkeypatch.setattr(_stream, "ROWS_BEHIND", 0)
    got = _both(tmp_path, source, monkeypatch)  # every table byte for byte as the one-process import
    built = got["stream"].built
    assert built and all(row is not None for row in built)
    assert all(len(row) == 3 and row[2] is None for row in built)  # no vectors: a keyword-only store
    assert all(len(columns) == 6 and len(fields) == 12 for columns, fields, _ in built)
    names = [fields[2] for _, fields, _ in built]
    assert names.count("log\x00in") == 2  # alice's and bob's


@pytest.mark.parametrize("embedder", ["default", "own"])
def test_the_child_embeds_the_rows_it_builds_with_the_shipped_model_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: str
) -> None:
    # With the shipped model the child appends each row's vector (every process makes the same), and
    # the store embeds none of them; another embedder's vectors are all made by the store.
    monkeypatch.setattr(_stream, "ROWS_BEHIND", 0)
    source = _odd_export(tmp_path / "odd.json", tmp_path)
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(source))
    embedded: list[int] = []
    embed_contents = Vectors.embed_contents

    def counted(self: Vectors, contents: Sequence[str]) -> Any:
        embedded.append(len(contents))
        return embed_contents(self, contents)

    monkeypatch.setattr(Vectors, "embed_contents", counted)
    got = _both(tmp_path, path, monkeypatch, "default" if embedder == "default" else HashEmbedder())
    vectors = got["tables"]["memory_vectors"]
    assert len(vectors) == len(got["tables"]["memories"]) > 0  # and byte for byte as one process made them
    built = got["stream"].built
    assert built and all(row is not None for row in built)
    assert all(fields is not None for _, fields, _ in built)
    if embedder == "default":
        assert all(type(vector) is bytes and len(vector) == 384 * 4 for _, _, vector in built)
        assert sum(embedded) == len(vectors)  # all in the one-process import, none streamed
    else:
        assert all(vector is None for _, _, vector in built)
        assert sum(embedded) == 2 * len(vectors)  # all, both ways


def test_a_file_with_memories_is_imported_the_ordinary_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with memkit.open(f"sqlite:///{tmp_path}/source.db?embedder=none") as mem:
        mem.add("TP53 guards the genome", "alice", "bio")
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id="alice")
        with history.step("plan", tool="llm", parameters={"q": "TP53"}):
            mem.search("TP53", "alice", "bio", limit=1)
        request = export_otlp(mem, memories=True)
    source = tmp_path / "with-memories.json"
    source.write_text(json.dumps(request))
    got = _both(tmp_path, source, monkeypatch)
    assert got["report"].memories == 1 and got["stream"].runs is None  # the child handed it back


def test_a_child_that_dies_leaves_the_import_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stream, "_CHILD", "import sys; sys.exit(3)")
    source = _sdk_file(tmp_path / "sdk.json", 100)
    got = _both(tmp_path, source, monkeypatch, user_id="alice", agent_id="bio")
    assert got["report"].steps == 100 and got["stream"].runs is None


def _refused(
    tmp_path: Path, request: dict[str, Any], monkeypatch: pytest.MonkeyPatch, name: str = "bad.json",
    written: int = 0,
) -> str:
    """The error both ways (the same text), with nothing written on either, though the streamed import
    had inserted chunks (``written``) before the refusal reached it; the store then opens and searches."""
    source = tmp_path / name
    source.write_text(json.dumps(request))
    messages = []
    for streamed in (False, True):
        path = tmp_path / f"{name}-{streamed}.db"
        with memkit.open(f"sqlite:///{path}?embedder=none") as mem:
            mem.add("TP53 already here", "alice", "bio")
        before = _tables(path)
        with pytest.raises(memkit.InvalidInputError) as caught:
            _import(path, source, streamed, monkeypatch, user_id="alice", agent_id="bio")
        messages.append(str(caught.value))
        if streamed:
            assert len(_INSERTED) >= written  # in the transaction rolled back
        after = _tables(path)
        assert after == before and len(after["memories"]) == 1 and after["trace_steps"] == after["recalls"] == []
        with memkit.open(f"sqlite:///{path}?embedder=none") as mem:
            assert [m.content for m in mem.search("TP53", "alice", "bio")] == ["TP53 already here"]
            mem.add("TP53 written after", "alice", "bio")
            assert len(mem.search("TP53", "alice", "bio")) == 2
    assert len(_Spy.made) == 1 and messages[1] == messages[0]
    return messages[0]


@pytest.fixture
def sdk_request(tmp_path: Path) -> dict[str, Any]:
    request: dict[str, Any] = json.loads(_sdk_file(tmp_path / "sdk.json", 300).read_text())
    return request


def _attrs(span: dict[str, Any]) -> list[dict[str, Any]]:
    attrs: list[dict[str, Any]] = span.setdefault("attributes", [])
    return attrs


@pytest.mark.parametrize(("breaker", "message"), [
    ("ends before it starts", r"span 299 \(.*\) ends before it starts"),
    ("unknown kind", r"span 299 \(.*\): unknown span kind 9"),
    ("cycle", r"its parent ids form a cycle"),
])
def test_a_bad_span_after_many_messages_refuses_the_file(
    tmp_path: Path, sdk_request: dict[str, Any], monkeypatch: pytest.MonkeyPatch, breaker: str, message: str
) -> None:
    spans = _spans(sdk_request)
    last = spans[-1]
    if breaker == "ends before it starts":
        last["endTimeUnixNano"] = str(int(last["startTimeUnixNano"]) - 1)
    elif breaker == "unknown kind":
        last["kind"] = 9
    else:  # the last trace's root made a child of one of its own descendants
        last["parentSpanId"] = next(s["spanId"] for s in spans if s.get("parentSpanId") == last["spanId"])
    assert __import__("re").search(message, _refused(tmp_path, sdk_request, monkeypatch, written=20))


def test_a_bad_span_after_a_refused_step_is_the_error_said(
    tmp_path: Path, sdk_request: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    spans = _spans(sdk_request)
    # A step the store refuses while building its rows (early: its message went out long before the end)...
    bad = next(span for span in spans[20:] if span["name"] == "llm")
    _attrs(bad).extend([{"key": "memkit.workflow_id", "value": {"stringValue": "wf"}},
                        {"key": "memkit.run_id", "value": {"intValue": "7"}}])
    alone = _refused(tmp_path, sdk_request, monkeypatch, "step.json", written=2)
    assert "trace_data['run_id'] must be a string, got int 7" in alone
    # ... and a span the parse refuses, further on: the one-process import names the span.
    _Spy.made = []
    spans[-1]["startTimeUnixNano"] = "soon"
    both = _refused(tmp_path, sdk_request, monkeypatch, "both.json", written=2)
    assert "startTimeUnixNano 'soon' is not a number of nanoseconds" in both


@pytest.mark.usefixtures("unchecked_reimport")
def test_recalls_go_in_with_each_chunk_and_refusals_are_said_in_the_one_process_order(
    tmp_path: Path, sdk_request: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A streamed import inserts the recalls that came with each chunk of steps (none are left for the
    # end). Its refusals are still those of an import of all the steps, then all the recalls: a clash
    # with a stored recall id is said only when no step after it is refused.
    source = tmp_path / "sdk.json"
    source.write_text(json.dumps(sdk_request))
    bad = next(span for span in reversed(_spans(sdk_request)) if span["name"] == "llm")  # in the last trace
    _attrs(bad).extend([{"key": "memkit.workflow_id", "value": {"stringValue": "wf"}},
                        {"key": "memkit.run_id", "value": {"intValue": "7"}}])
    late = tmp_path / "late.json"
    late.write_text(json.dumps(sdk_request))
    batches: list[int] = []

    def counted(bodies: Any) -> list[tuple[Any, ...]]:
        batches.append(len(bodies))
        return recall_rows(bodies)

    recall_rows = _step_rows.recall_rows
    monkeypatch.setattr(_step_rows, "recall_rows", counted)
    for streamed in (False, True):
        path = tmp_path / f"{streamed}.db"
        batches.clear()
        first = _import(path, source, streamed, monkeypatch, user_id="alice", agent_id="bio")
        assert sum(batches) == first.recalls > 0
        # Streamed: a batch with each trace's chunk (the child sends a trace once the next begins).
        assert len(batches) == first.runs > 1 if streamed else batches == [first.recalls]
        before = _tables(path)
        with pytest.raises(memkit.InvalidInputError, match="a recall with one of these ids already exists"):
            _import(path, source, streamed, monkeypatch, user_id="alice", agent_id="bio")
        assert _tables(path) == before
        with pytest.raises(memkit.InvalidInputError, match=r"trace_data\['run_id'\] must be a string, got int 7"):
            _import(path, late, streamed, monkeypatch, user_id="alice", agent_id="bio")
        assert _tables(path) == before


def test_a_recall_span_without_its_step_refuses_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _odd_export(tmp_path / "odd.json", tmp_path)
    spans = [s for block in request["resourceSpans"] for scope in block["scopeSpans"] for s in scope["spans"]]
    owner = next(s for s in spans if any(a["key"] == "memkit.recall.id" for a in s.get("attributes", [])))
    for block in request["resourceSpans"]:
        for scope in block["scopeSpans"]:
            scope["spans"] = [s for s in scope["spans"] if s["spanId"] != owner["parentSpanId"]]
    message = _refused(tmp_path, request, monkeypatch)
    assert "a memkit recall span whose parent step is not in the file" in message


_JSONISH = st.text(alphabet=' \t\n\r{}[]":,0123456789-.eEtrufalsnNIy\u00a0\ufeff', max_size=10)


@settings(max_examples=2000, deadline=None)
@given(text=_JSONISH | st.sampled_from(["3 hits", " 3 ", '{"a": 1} x', "1.5.2", "\ufeff{}", " \u00a0{}", '"s" "t"']))
def test_an_attribute_reads_as_json_exactly_when_json_loads_reads_it(text: str) -> None:
    try:
        parsed = json.loads(text)
    except ValueError:
        expected: Any = {"value": text}
    else:
        expected = parsed if isinstance(parsed, dict) else {"value": parsed}
    assert json.dumps(_json_or_text(text)) == json.dumps(expected)


def test_a_small_file_a_dict_one_core_or_a_busy_machine_import_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", _STREAM_MIN_BYTES)
    source = _sdk_file(tmp_path / "sdk.json", 400)
    assert source.stat().st_size < _STREAM_MIN_BYTES
    assert _import(tmp_path / "small.db", source, True, monkeypatch, user_id="alice").steps == 400
    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", 0)
    request = json.loads(source.read_text())
    assert _import(tmp_path / "dict.db", request, True, monkeypatch, user_id="alice").steps == 400
    assert _Spy.made == []  # no child started for either
    monkeypatch.setattr(_stream, "_cores", lambda: 1)  # a machine (or cgroup) with one core: no gain
    assert _import(tmp_path / "one-core.db", source, True, monkeypatch, user_id="alice").steps == 400
    assert _Spy.made == []
    # Two cores, but more than two processes want them on average: no core to spare.
    monkeypatch.setattr(_stream, "_cores", lambda: 2)
    monkeypatch.setattr(_stream, "_load", lambda: 2.1)
    assert _import(tmp_path / "busy.db", source, True, monkeypatch, user_id="alice").steps == 400
    assert _Spy.made == []
    monkeypatch.setattr(_stream, "_load", lambda: 1.9)
    assert _import(tmp_path / "free.db", source, True, monkeypatch, user_id="alice").steps == 400
    assert len(_Spy.made) == 1


_SPAN = st.fixed_dictionaries({"traceId": st.sampled_from(["aa" * 16, "bb" * 16]), "name": st.text(max_size=3)},
                              optional={"attributes": st.lists(st.fixed_dictionaries(
                                  {"key": st.text(max_size=2), "value": st.fixed_dictionaries(
                                      {"stringValue": st.text(max_size=3)})}), max_size=2)})
_SCOPE = st.fixed_dictionaries({}, optional={"spans": st.lists(_SPAN, max_size=4), "scope": st.just({"name": "x"})})
_BLOCK = st.fixed_dictionaries({}, optional={
    "resource": st.one_of(st.none(), st.just({"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]})),
    "scopeSpans": st.lists(_SCOPE, max_size=3), "instrumentationLibrarySpans": st.lists(_SCOPE, max_size=1),
    "schemaUrl": st.text(max_size=2)})
_REQUEST = st.fixed_dictionaries({}, optional={"resourceSpans": st.lists(_BLOCK, max_size=3), "x": st.integers()})


_JUNK = ["", "\n", " \r\n", "\n\n", "\x0c\n", "x", ",", ' {"resourceSpans": []}']  # the last 3 make it not JSON


def _blocks_read(read: Callable[[], Any]) -> Any:
    """(span, resource) pairs of every request, or the kind of error raised."""
    try:
        return [(span, resource) for blocks in read() for spans, resource in blocks for span in spans]
    except Exception as exc:  # what matters is that there was one
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(requests=st.lists(_REQUEST, min_size=1, max_size=3), indent=st.sampled_from([None, 1]),
       shuffle=st.randoms(use_true_random=False), junk=st.sampled_from(_JUNK),
       twice=st.booleans())
def test_a_file_read_span_by_span_gives_what_reading_it_whole_gives_or_is_left_to_that(
    tmp_path_factory: pytest.TempPathFactory, requests: list[dict[str, Any]], indent: int | None, shuffle: Any,
    junk: str, twice: bool,
) -> None:
    def text_of(request: dict[str, Any]) -> str:
        for block in request.get("resourceSpans", []):  # the keys of a block in any order
            items = list(block.items())
            shuffle.shuffle(items)
            block.clear()
            block.update(items)
        text = json.dumps(request, indent=indent if len(requests) == 1 else None)
        if twice and '"resourceSpans": ' in text:  # a key twice: json.loads keeps the last
            text = text.replace('"resourceSpans": ', '"resourceSpans": [{"resource": null, "scopeSpans": [{"spans": '
                                '[{"name": "gone"}]}]}], "resourceSpans": ', 1)
        return text

    path = tmp_path_factory.mktemp("lazy") / "spans.json"
    path.write_text("\n".join(map(text_of, requests)) + junk)
    whole = _blocks_read(lambda: (_walk(request) for request in _load(str(path))))
    lazy = _blocks_read(lambda: _incremental.requests(str(path)))
    if isinstance(lazy, type):  # refused, or not the plain layout: the import is done the ordinary way
        plain = all(
            "instrumentationLibrarySpans" not in b and ("scopeSpans" not in b or (
                "resource" in b and list(b).index("scopeSpans") > list(b).index("resource")))
            for r in requests for b in r.get("resourceSpans", []))
        assert isinstance(whole, type) or not plain or twice or junk in _JUNK[-3:], (lazy, whole)
    else:
        assert lazy == whole


def test_the_child_imports_neither_the_otel_sdk_nor_the_store() -> None:
    # Half of its start was memkit.otel's package importing the exporter, the live processor and the
    # one-process import; it needs none of them, nor pydantic (the recall models: a foreign
    # retriever's recall is built as a plain body) and numpy (only the store's row maker, later).
    code = ("import sys, memkit.otel._child; print(sorted(m for m in sys.modules if m.startswith(("
            "'opentelemetry', 'memkit.otel._import', 'memkit.otel._export', 'memkit.otel._live', 'memkit._sync',"
            " 'memkit.otel._stream', 'memkit.store._base', 'memkit.store._ops', 'memkit._recall', 'pydantic',"
            " 'numpy'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
    import memkit.otel as otel  # and the package still gives its names

    assert otel.import_otlp is import_otlp and "MemkitSpanProcessor" in dir(otel)


def test_the_timeline_hook_records_both_processes_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline: list[tuple[float, str, str, int]] = []
    monkeypatch.setattr(_stream, "TIMELINE", timeline)
    _import(tmp_path / "timed.db", _sdk_file(tmp_path / "sdk.json", 200), True, monkeypatch, user_id="alice")
    events = sorted(timeline)
    names = [(who, what) for _, who, what, _ in events]
    for before, after in [(("parent", "spawn"), ("child", "python")), (("child", "python"), ("child", "imported")),
                          (("child", "send"), ("parent", "steps")), (("child", "done"), ("parent", "done"))]:
        assert names.index(before) < names.index(after)
    assert sum(steps for _, who, what, steps in events if (who, what) == ("parent", "steps")) == 200
    assert sum(steps for _, who, what, steps in events if (who, what) == ("child", "sent")) == 200
