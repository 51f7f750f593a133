"""The parts of a memory graph: typed nodes and edges, and the public properties each carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memkit._core._graph_schema import (
    EDGE_PROPERTIES,
    NODE_PROPERTIES,
)
from memkit._core._models import MemoryItem
from memkit._core._records import Record, to_us

if TYPE_CHECKING:
    pass

@dataclass(frozen=True)
class GraphNode:
    """One node: its id, its type (a schema label) and its properties."""

    id: str
    type: str
    properties: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class GraphEdge:
    """One directed relationship between two node ids."""

    id: str
    type: str
    source: str
    target: str
    properties: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def node_properties(label: str, props: dict[str, Any]) -> dict[str, Any]:
    """The public properties of a node (missing ones as ``None``)."""
    return {k: props.get(k) for k in NODE_PROPERTIES[label]}


def edge_properties(kind: str, props: dict[str, Any]) -> dict[str, Any]:
    return {k: props.get(k) for k in EDGE_PROPERTIES.get(kind, ())}


def _record(item: MemoryItem) -> Record:
    return Record(
        id=item.id, user_id=item.user_id or "", agent_id=item.agent_id or "", content=item.content,
        metadata=dict(item.metadata), created_us=to_us(item.created_at) if item.created_at else 0,
    )

