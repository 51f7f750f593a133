"""The typed records that cross the port.

Every model here and in :mod:`memkit._recall` builds its validator on first use
(``defer_build``): building them all costs about 40 ms of CPU at import, which a command that
never makes one (``memkit runs``) would pay on every call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Health", "MemoryFilter", "MemoryItem", "NamespaceInfo", "NewMemory", "Stats"]


class MemoryFilter(BaseModel):
    """Optional filter container for metadata-based queries.

    ``filters=MemoryFilter(metadata={...})`` and ``filters={...}`` mean the same.
    """

    model_config = ConfigDict(defer_build=True)

    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryItem(BaseModel):
    """Normalized memory record returned by providers.

    ``score`` is higher-is-better and set by ``search``; ``score_details`` says
    which retrieval leg found the item and at what rank (``None`` outside search).
    """

    model_config = ConfigDict(extra="allow", defer_build=True)

    id: str
    content: str
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None
    agent_id: str | None = None
    user_id: str | None = None
    score_details: dict[str, Any] | None = None


class NewMemory(BaseModel):
    """One memory to write with ``add_many``.

    ``id`` and ``created_at`` are for lossless imports; leave them out and the
    store assigns a fresh id and the current time.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    content: Any
    user_id: Any
    agent_id: Any
    metadata: Any = None
    id: Any = None
    created_at: datetime | None = None


class NamespaceInfo(BaseModel):
    """One (user_id, agent_id) namespace and its activity."""

    model_config = ConfigDict(defer_build=True)

    user_id: str
    agent_id: str
    count: int
    first_at: datetime | None = None
    last_at: datetime | None = None


class Stats(BaseModel):
    """Size of a store; adapters may add backend-specific fields."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    provider: str
    memories: int
    traces: int
    namespaces: int
    storage_bytes: int | None = None


class Health(BaseModel):
    """Whether a store answers, and how long it took."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    ok: bool
    provider: str
    latency_ms: float
    detail: str = ""
