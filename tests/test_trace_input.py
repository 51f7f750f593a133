"""Hostile and sloppy trace input on every backend: data nested hundreds of levels deep, and
ExecutionItem fields of the wrong type, are refused with an InvalidInputError naming what was wrong,
and nothing is stored; missing fields and other spellings are not wrong."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit import ConfigError, InvalidInputError, Limits, frames
from memkit._serve._mcp import Access, McpMemory
from memkit._sync import run_sync
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter
from memkit.traces import Redactor, set_trace_redactor


def _nested(depth: int, kind: str = "dict") -> Any:
    value: Any = {"leaf": 1}
    for _ in range(depth):
        value = {"x": value} if kind == "dict" else [value]
    return value


@pytest.fixture(scope="module")
def shared_mem0(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One offline mem0 (real mem0 code, memkit's config), loaded once for this module."""
    from memkit.adapters import Mem0Adapter

    owner = Mem0Adapter(tmp_path_factory.mktemp("mem0-input"))
    yield owner._backend.memory  # type: ignore[attr-defined]
    owner.close()


@pytest.fixture(params=["memory", "sqlite", "falkordb", "neo4j", "mem0"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    adapter: Any
    if request.param == "memory":
        adapter = InMemoryAdapter()
    elif request.param == "sqlite":
        adapter = SQLiteAdapter(tmp_path / "input.db", embedder=None)
    elif request.param == "falkordb":
        adapter = FalkorDBAdapter.from_url(request.getfixturevalue("falkordb_server").url(f"in-{uuid.uuid4().hex[:8]}"))
    elif request.param == "neo4j":
        adapter = Neo4jAdapter(request.getfixturevalue("neo4j_uri"))
    else:
        from memkit.adapters import Mem0Adapter

        adapter = Mem0Adapter(tmp_path, memory=request.getfixturevalue("shared_mem0"))
    await adapter.reset()
    yield adapter
    await adapter.reset()
    await adapter.aclose()


async def _nothing_stored(store: Any) -> None:
    assert (await store.stats()).memories == 0
    assert await store.get_all("u", "a", 10) == []


@pytest.mark.parametrize("where", ["parameters", "result", "metadata", "top"])
@pytest.mark.parametrize("kind", ["dict", "list"])
async def test_trace_data_nested_600_levels_is_refused_before_anything_walks_it(
    store: Any, where: str, kind: str
) -> None:
    deep = _nested(600, kind)
    data = deep if where == "top" and kind == "dict" else {where: deep}
    with pytest.raises(InvalidInputError, match=r"trace_data is nested deeper than 10 levels \(at trace_data"):
        await store.add_trace("a", "wf", data, user_id="u")
    await _nothing_stored(store)


async def test_deep_trace_data_is_refused_whatever_the_redactor(store: Any) -> None:
    # A custom redactor walks the data too (recursively, like this one): the depth check runs first.
    previous = set_trace_redactor(Redactor(patterns=[r"^x$"]))
    try:
        with pytest.raises(InvalidInputError, match="nested deeper"):
            await store.add_trace("a", "wf", {"parameters": _nested(5_000)}, user_id="u")
        set_trace_redactor(None)
        with pytest.raises(InvalidInputError, match="nested deeper"):
            await store.add_trace("a", "wf", {"parameters": _nested(5_000, "list")}, user_id="u")
    finally:
        set_trace_redactor(previous)
    await _nothing_stored(store)


@pytest.mark.parametrize("kind", ["dict", "list"])
async def test_add_metadata_nested_600_levels_is_refused(store: Any, kind: str) -> None:
    with pytest.raises(InvalidInputError, match="metadata is nested deeper than 10 levels"):
        await store.add("TP53 note", "u", "a", {"k": _nested(600, kind)})
    with pytest.raises(InvalidInputError, match="item 1 of add_many: metadata is nested deeper"):
        await store.add_many([{"content": "fine", "user_id": "u", "agent_id": "a"},
                              {"content": "deep", "user_id": "u", "agent_id": "a",
                               "metadata": {"k": _nested(600, kind)}}])
    await _nothing_stored(store)


def test_a_depth_limit_no_walk_could_survive_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="max_metadata_depth must be an int from 1 to 200, got 5000"):
        Limits(max_metadata_depth=5_000)
    deep = Limits(max_metadata_depth=200)
    store = InMemoryAdapter(limits=deep)
    # At the highest limit a trace just under it is stored and read back through every walk.
    trace_id = asyncio.run(store.add_trace("a", "wf", {"parameters": _nested(196)}, user_id="u"))
    assert frames.traces_frame(store).index.tolist() == [trace_id]
    with pytest.raises(InvalidInputError, match="nested deeper than 200"):
        asyncio.run(store.add_trace("a", "wf", {"parameters": _nested(600)}, user_id="u"))


WRONG_TYPES = [
    ({"tool": 5}, r"trace_data\['tool'\] must be a string, got int 5"),
    ({"tool": {"name": "blast"}}, r"trace_data\['tool'\] must be a string, got dict"),
    ({"status": ["success"]}, r"trace_data\['status'\] must be a string, got list \['success'\]"),
    ({"error": 404}, r"trace_data\['error'\] must be a string, got int 404"),
    ({"step_name": 3.5}, r"trace_data\['step_name'\] must be a string"),
    ({"run_id": 7}, r"trace_data\['run_id'\] must be a string"),
    ({"step_index": "three"}, r"trace_data\['step_index'\] must be an integer \(or a string of digits"),
    ({"step_index": True}, r"trace_data\['step_index'\] must be an integer.*got bool"),
    ({"step_index": 2.5}, r"trace_data\['step_index'\] must be an integer"),
    ({"retry_count": [1]}, r"trace_data\['retry_count'\] must be an integer"),
    ({"timestamp": "yesterday"}, r"trace_data\['timestamp'\] must be a number of seconds"),
    ({"duration": [1.0]}, r"trace_data\['duration'\] must be a number of seconds, got list"),
    ({"duration": False}, r"trace_data\['duration'\] must be a number of seconds, got bool"),
    ({"parameters": ["nr", 10]}, r"trace_data\['parameters'\] must be a dict, got list"),
    ({"result": "3 hits"}, r"trace_data\['result'\] must be a dict, got str '3 hits'"),
    ({"retry_errors": "timeout"}, r"trace_data\['retry_errors'\] must be a list of strings"),
]


@pytest.mark.parametrize(("bad", "message"), WRONG_TYPES,
                         ids=[f"{next(iter(b))}-{type(next(iter(b.values()))).__name__}" for b, _ in WRONG_TYPES])
async def test_a_field_of_the_wrong_type_is_refused_and_nothing_is_stored(
    store: Any, bad: dict[str, Any], message: str
) -> None:
    data = {"step_name": "align", "tool": "bwa", "status": "success", "step_index": 0, **bad}
    with pytest.raises(InvalidInputError, match=message):
        await store.add_trace("a", "wf", data, user_id="u")
    await _nothing_stored(store)


async def test_missing_fields_other_spellings_and_unambiguous_forms_are_kept(store: Any) -> None:
    """A researcher's steps: fields missing or None, keys spelt their way, numbers as text."""
    steps = [
        {},  # nothing at all
        {"stepName": "fetch", "Tool": "curl", "STATUS": 1, "toolName": ["x"]},  # others' spellings: kept as they are
        {"step_name": "align", "tool": None, "status": None, "error": None, "parameters": None, "result": None},
        {"step_name": "call", "tool": "gatk", "status": "failed", "error": "OOM", "step_index": "3",
         "retry_count": 2.0, "timestamp": "2026-05-01T10:00:00+00:00", "duration": "1.5", "retry_errors": ["OOM"]},
        {"step_name": "report", "step_index": 4, "timestamp": datetime(2026, 5, 1, 10, 0, 2, tzinfo=UTC),
         "result": {"ok": True}},
    ]
    ids = [await store.add_trace("a", "wf", data, user_id="u") for data in steps]
    stored = {item.id: item.metadata["trace"] for item in await store.get_all("u", "a", 10)}
    assert set(stored) == set(ids)
    assert stored[ids[1]] == steps[1]
    assert stored[ids[3]]["step_index"] == 3 and stored[ids[3]]["retry_count"] == 2
    assert stored[ids[3]]["timestamp"] == datetime(2026, 5, 1, 10, tzinfo=UTC).timestamp()
    assert stored[ids[3]]["duration"] == 1.5
    assert stored[ids[4]]["timestamp"] == datetime(2026, 5, 1, 10, 0, 2, tzinfo=UTC).timestamp()
    df = frames.traces_frame(store)
    row = df.loc[ids[3]]
    assert row.step_index == 3 and row.retry_count == 2 and row.duration_s == 1.5
    assert row.started_at == datetime(2026, 5, 1, 10, tzinfo=UTC)
    # the views the wrong types used to break read every one of these steps
    assert frames.runs_frame(store).steps.sum() == len(steps)


def test_the_facade_and_mcp_refuse_the_same(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'x.db'}?embedder=none") as mem:
        with pytest.raises(InvalidInputError, match=r"trace_data\['error'\] must be a string"):
            mem.add_trace("a", "wf", {"error": 500}, user_id="u")
        server = McpMemory(mem.provider, Access.from_flags("u", "a", None, False))
        for step, message in (({"tool": 5}, "trace_data['tool'] must be a string"),
                              ({"parameters": _nested(600)}, "trace_data is nested deeper")):
            with pytest.raises(InvalidInputError) as caught:
                run_sync(server.call("record_step", {"workflow_id": "wf", "step": step}))
            assert message in str(caught.value)
        with pytest.raises(InvalidInputError, match="metadata is nested deeper"):
            run_sync(server.call("remember", {"content": "x", "metadata": _nested(600)}))
        assert mem.stats().memories == 0
