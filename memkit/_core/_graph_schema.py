"""memkit's graph schema, and how one stored record maps onto it.

Every backend derives its graph from records with :func:`record_parts`, so the
graph databases (which store it) and the row stores (which rebuild it on the fly
for :func:`memkit.graph.memory_graph`) produce the same nodes, ids and properties::

    (Namespace)-[:HAS_MEMORY]->(Memory)-[:MENTIONS]->(Entity)
    (Workflow)-[:HAS_TRACE]->(Trace)-[:HAS_STEP {order}]->(Step)-[:NEXT]->(Step)
    (Step)-[:USES_TOOL]->(Tool)
    (Step)-[:RECORDED_AS]->(Memory)
    (Step)-[:HAS_RECALL]->(Recall)-[:RECALLED {rank, score}]->(Memory)

``Recall`` nodes exist only in the graph databases, which store recalls as nodes (row
stores keep them in their own table and do not draw them).

Node ids are deterministic (UUID 5 of a JSON key that includes the namespace),
so the same memory gives the same graph everywhere and namespaces never share a
node. ``NEXT`` chains are recomputed when a trace changes.
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from memkit._core._records import Record

__all__ = [
    "DEFAULT_ENTITY_FIELDS",
    "EDGE_TYPES",
    "NODE_LABELS",
    "NODE_PROPERTIES",
    "RecordParts",
    "edge_id",
    "memory_key",
    "node_key",
    "record_parts",
]

NODE_LABELS = ("Namespace", "Memory", "Entity", "Workflow", "Trace", "Step", "Tool", "Recall")
EDGE_TYPES = ("HAS_MEMORY", "MENTIONS", "HAS_TRACE", "HAS_STEP", "NEXT", "USES_TOOL", "RECORDED_AS",
              "HAS_RECALL", "RECALLED")

# What each node type exposes in a MemoryGraph (``key`` and ``seq`` are storage details).
NODE_PROPERTIES: dict[str, tuple[str, ...]] = {
    "Namespace": ("id", "user_id", "agent_id"),
    "Memory": ("id", "user_id", "agent_id", "content", "metadata", "type", "workflow_id", "created_us"),
    "Entity": ("id", "user_id", "agent_id", "kind", "name"),
    "Workflow": ("id", "user_id", "agent_id", "workflow_id"),
    "Trace": ("id", "user_id", "agent_id", "workflow_id", "run_id"),
    "Step": ("id", "user_id", "agent_id", "workflow_id", "run_id", "order", "name", "status", "tool", "created_us"),
    "Tool": ("id", "user_id", "agent_id", "name"),
    "Recall": ("id", "user_id", "agent_id", "kind", "query", "mode", "workflow_id", "run_id", "step_index",
               "step_name", "created_us"),
}
EDGE_PROPERTIES: dict[str, tuple[str, ...]] = {"HAS_STEP": ("order",), "MENTIONS": ("field",),
                                               "RECALLED": ("rank", "score")}

# Metadata fields whose values become Entity nodes unless the adapter is told otherwise.
DEFAULT_ENTITY_FIELDS = ("gene", "protein", "disease", "topic", "tool", "dataset", "entities")

_UUID_NS = uuid.UUID("5b0f3c2e-8f4c-4b8e-9a57-6d1c1f0c9a11")
# Steps without an integer step_index sort after the numbered ones, by time.
UNORDERED = 2**62


@functools.lru_cache(maxsize=65_536)
def node_key(label: str, *parts: str) -> str:
    """A collision-free key: JSON keeps ``("a:b", "c")`` apart from ``("a", "b:c")``."""
    return json.dumps([label, *parts], ensure_ascii=False, separators=(",", ":"))


def memory_key(memory_id: str) -> str:
    """The indexed lookup key of a memory.

    FalkorDB 4.16's range index trims leading and trailing whitespace from the
    strings it stores, so an indexed ``{id: "ab"}`` also finds ``"ab "``. Lookups
    therefore go through JSON-encoded keys, which start and end with a quote.
    """
    return json.dumps(memory_id, ensure_ascii=False)


@functools.lru_cache(maxsize=65_536)
def key_id(key: str) -> str:
    return str(uuid.uuid5(_UUID_NS, key))


def edge_id(kind: str, source: str, target: str) -> str:
    return str(uuid.uuid5(_UUID_NS, f"{kind}|{source}|{target}"))


def _entity_values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [
        str(v) for v in items
        if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip()
    ]


@dataclass
class RecordParts:
    """The graph fragment one record contributes (flat dicts, ready to be Cypher parameters)."""

    memory: dict[str, Any]
    mentions: list[dict[str, Any]] = field(default_factory=list)
    step: dict[str, Any] | None = None
    tool: dict[str, Any] | None = None


def record_parts(record: Record, entity_fields: tuple[str, ...] = DEFAULT_ENTITY_FIELDS, seq: int = 0) -> RecordParts:
    """Map one record onto the schema (pure: no I/O)."""
    user, agent, meta = record.user_id, record.agent_id, record.metadata
    ns_key = node_key("Namespace", user, agent)
    ns_id = key_id(ns_key)
    is_trace = meta.get("type") == "trace" and isinstance(meta.get("workflow_id"), str)
    workflow = meta["workflow_id"] if is_trace else None
    kind = meta.get("type")
    memory = {
        "id": record.id, "user_id": user, "agent_id": agent, "content": record.content,
        "metadata": json.dumps(meta, ensure_ascii=False, separators=(",", ":")),
        "type": kind if isinstance(kind, str) else None, "workflow_id": workflow,
        "created_us": record.created_us, "seq": seq, "key": memory_key(record.id),
        "ns_key": ns_key, "ns_id": ns_id, "rel_id": edge_id("HAS_MEMORY", ns_id, record.id),
    }
    parts = RecordParts(memory)
    seen: set[str] = set()
    for name in entity_fields:
        # A step's tool is its Tool node; an Entity beside it would draw every tool twice.
        if name not in meta or (is_trace and name == "tool"):
            continue
        for value in _entity_values(meta[name]):
            key = node_key("Entity", user, agent, name, value)
            if key in seen:
                continue
            seen.add(key)
            eid = key_id(key)
            parts.mentions.append({
                "memory_id": record.id, "memory_key": memory_key(record.id), "key": key, "id": eid,
                "kind": name, "name": value,
                "user_id": user, "agent_id": agent, "rel_id": edge_id("MENTIONS", record.id, eid),
            })
    if workflow is None:
        return parts
    run = meta.get("run_id")
    run_id = str(run) if isinstance(run, (str, int)) and not isinstance(run, bool) else None
    index = meta.get("step_index")
    order = index if isinstance(index, int) and not isinstance(index, bool) else None
    wf_key = node_key("Workflow", user, agent, workflow)
    tr_key = node_key("Trace", user, agent, workflow, run_id or "")
    wf_id, tr_id = key_id(wf_key), key_id(tr_key)
    step_id = key_id(node_key("Step", record.id))
    tool = meta.get("tool")
    tool_name = str(tool) if isinstance(tool, (str, int, float)) and not isinstance(tool, bool) else None
    step_name = meta.get("step_name")
    status = meta.get("status")
    parts.step = {
        "memory_id": record.id, "memory_key": memory_key(record.id), "id": step_id, "user_id": user, "agent_id": agent,
        "workflow_key": wf_key, "workflow_node": wf_id, "workflow_id": workflow,
        "trace_key": tr_key, "trace_node": tr_id, "run_id": run_id,
        "order": order, "sort": UNORDERED if order is None else order,
        "name": step_name if isinstance(step_name, str) else None,
        "status": status if isinstance(status, str) else None,
        "tool": tool_name, "created_us": record.created_us,
        "has_trace_id": edge_id("HAS_TRACE", wf_id, tr_id),
        "has_step_id": edge_id("HAS_STEP", tr_id, step_id),
        "recorded_id": edge_id("RECORDED_AS", step_id, record.id),
    }
    if tool_name is not None:
        tool_key = node_key("Tool", user, agent, tool_name)
        tool_id = key_id(tool_key)
        parts.tool = {
            "step_id": step_id, "key": tool_key, "id": tool_id, "name": tool_name,
            "user_id": user, "agent_id": agent, "rel_id": edge_id("USES_TOOL", step_id, tool_id),
        }
    return parts
