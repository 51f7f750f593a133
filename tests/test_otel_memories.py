"""Memory operations in the OTLP export: each memory a ``create_memory`` span (GenAI memory
attributes), each search a ``search_memory`` span, and both read back by ``import_otlp``.

Two users write to the same agent id and run the same workflow: nothing crosses namespaces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit.otel import export_otlp, import_otlp
from memkit.traces import ExecutionHistory


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for r in request["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def _write(mem: memkit.Memory) -> None:
    for user, facts in (("u1", ["TP53 is a tumour suppressor", "KRAS drives pancreatic cancer"]),
                        ("u2", ["BRCA1 repairs DNA"])):
        for i, fact in enumerate(facts):
            mem.add(fact, user, "bio", {"source": "pubmed", "rank": i})
        history = ExecutionHistory(memory_provider=mem, workflow_id="triage", agent_id="bio", user_id=user,
                                   run_id="r1")
        with history.step("recall", tool="memkit"):
            mem.search("tumour", user, "bio", limit=2)


def test_memory_writes_and_searches_are_their_genai_operations(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'a.db'}?embedder=none") as mem:
        _write(mem)
        spans = _spans(export_otlp(mem, memories=True))
        by_op: dict[str, list[dict[str, Any]]] = {}
        for span in spans:
            by_op.setdefault(_attrs(span)["gen_ai.operation.name"], []).append(span)
        assert sorted(by_op) == ["create_memory", "execute_tool", "search_memory"]
        created = {_attrs(s)["gen_ai.memory.record.id"]: _attrs(s) for s in by_op["create_memory"]}
        u1 = {m.id: m for m in mem.get_all("u1", "bio", 10) if m.metadata.get("type") != "trace"}
        assert set(u1) < set(created) and len(created) == 3
        for memory_id, memory in u1.items():
            attrs = created[memory_id]
            assert attrs["gen_ai.memory.namespace"] == "u1/bio" and attrs["input.value"] == memory.content
        # One trace per namespace for the writes; a search is the child of the step that made it.
        assert len({s["traceId"] for s in by_op["create_memory"]}) == 2
        steps = {s["spanId"] for s in by_op["execute_tool"]}
        assert all(s["parentSpanId"] in steps for s in by_op["search_memory"])
        assert _attrs(by_op["search_memory"][0])["gen_ai.memory.query"] == "tumour"
        # Left out by default, and whenever the export is narrowed to a workflow or a run.
        assert not [s for s in _spans(export_otlp(mem)) if s["name"].startswith("create_memory")]
        assert not [s for s in _spans(export_otlp(mem, memories=True, workflow_id="triage"))
                    if s["name"].startswith("create_memory")]


def test_exported_memories_import_as_memories_in_their_own_namespace(tmp_path: Path) -> None:
    path = tmp_path / "all.otlp.json"
    with memkit.open(f"sqlite:///{tmp_path / 'a.db'}?embedder=none") as mem:
        _write(mem)
        export_otlp(mem, path, memories=True)
        before = {(m.user_id, m.id): (m.content, m.metadata, m.created_at)
                  for u in ("u1", "u2") for m in mem.get_all(u, "bio", 10) if m.metadata.get("type") != "trace"}
    with memkit.open(f"sqlite:///{tmp_path / 'b.db'}?embedder=none") as copy:
        report = import_otlp(copy, path)
        assert (report.memories, report.steps, report.recalls, report.runs) == (3, 2, 2, 2)
        after = {(m.user_id, m.id): (m.content, m.metadata, m.created_at)
                 for u in ("u1", "u2") for m in copy.get_all(u, "bio", 10) if m.metadata.get("type") != "trace"}
        assert after == before
        # Searchable again, and each user finds only their own.
        assert [h.content for h in copy.search("BRCA1", "u1", "bio")] == []
        assert [h.content for h in copy.search("BRCA1", "u2", "bio")] == ["BRCA1 repairs DNA"]


def test_an_import_whose_memory_is_already_there_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "all.otlp.json"
    with memkit.open(f"sqlite:///{tmp_path / 'a.db'}?embedder=none") as mem:
        _write(mem)
        export_otlp(mem, path, memories=True)
        kept = mem.get_all("u2", "bio", 10)
    with memkit.open(f"sqlite:///{tmp_path / 'b.db'}?embedder=none") as copy:
        clash = next(m for m in kept if m.metadata.get("type") != "trace")
        copy.add_many([{"id": clash.id, "content": "another note", "user_id": "u3", "agent_id": "x"}])
        with pytest.raises(memkit.InvalidInputError, match="already exists"):
            import_otlp(copy, path)
        assert copy.get_all("u1", "bio", 10) == [] and copy.get_all("u2", "bio", 10) == []
        assert copy.recalls() == []
