"""Write a memkit backend: subclass :class:`Store`, write the methods for what your database does.

Every public method of the port (``add``, ``search``, ``get_all``, ``delete``, ...) is written
once on :class:`Store`: it checks its arguments into one operation, a plain frozen dataclass
(:class:`WriteOp`, :class:`SearchOp`, ...), and executes it by the backend method the table
:data:`HANDLERS` names. A backend writes five methods, each taking its operation:

* ``_write(WriteOp)``: store ``op.records`` (:class:`Record`, ids given), all or none;
* ``_list(ListOp)``: one namespace newest first, ``op.conditions`` applied (:func:`matches`);
* ``_rank(SearchOp)``: find keyword (and, with an embedder, semantic) candidates, then
  :func:`rank` fuses them the way every memkit backend does;
* ``_delete(DeleteOp)`` and ``_reset(ResetOp)``.

It offers more by writing more: ``_get(GetOp)`` gives ``get``; ``_namespaces``, ``_stats``,
``_ping``, ``_export``, ``_close``, the recall and mark methods, ... (the table names each one).
A capability is offered whole or not at all (a class that writes half of one fails when it
is defined); ``isinstance(store, memkit.SupportsGet)`` answers from what the class writes.

Register the backend under a URL scheme with an entry point, and ``memkit.open("dict://")``
builds it (``Class.from_url(url)`` where the class has one, else ``Class()``)::

    [project.entry-points."memkit.backends"]
    dict = "my_package.my_module:DictStore"

Then run :class:`memkit.testing.ProviderConformance` on it: the suite is the specification.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memkit._core._filters import matches
    from memkit._core._port import Capability
    from memkit._core._records import Record
    from memkit.store._base import HANDLERS, Store
    from memkit.store._ops import (
        AddRecallsOp,
        CloseOp,
        DeleteOp,
        ExportOp,
        GetOp,
        ImportStepsOp,
        ListOp,
        MarksOp,
        NamespacesOp,
        Op,
        PingOp,
        PutMarksOp,
        RecallsOp,
        RemoveMarksOp,
        ResetOp,
        RunsOp,
        SearchOp,
        StatsOp,
        TraceColumnsOp,
        TracePayloadsOp,
        ValuesOp,
        WriteOp,
    )
    from memkit.store._registry import ENTRY_POINT_GROUP
    from memkit.store._search import rank

__all__ = [
    "ENTRY_POINT_GROUP",
    "HANDLERS",
    "AddRecallsOp",
    "Capability",
    "CloseOp",
    "DeleteOp",
    "ExportOp",
    "GetOp",
    "ImportStepsOp",
    "ListOp",
    "MarksOp",
    "NamespacesOp",
    "Op",
    "PingOp",
    "PutMarksOp",
    "RecallsOp",
    "Record",
    "RemoveMarksOp",
    "ResetOp",
    "RunsOp",
    "SearchOp",
    "StatsOp",
    "Store",
    "TraceColumnsOp",
    "TracePayloadsOp",
    "ValuesOp",
    "WriteOp",
    "matches",
    "rank",
]

# Loaded on first use: the registry (``memkit.store._registry``) serves the command line's reads,
# which must not pay for the models that the base and the operations import.
_LAZY: dict[str, str] = {
    "ENTRY_POINT_GROUP": "memkit.store._registry",
    "HANDLERS": "memkit.store._base",
    "AddRecallsOp": "memkit.store._ops",
    "Capability": "memkit._core._port",
    "CloseOp": "memkit.store._ops",
    "DeleteOp": "memkit.store._ops",
    "ExportOp": "memkit.store._ops",
    "GetOp": "memkit.store._ops",
    "ImportStepsOp": "memkit.store._ops",
    "ListOp": "memkit.store._ops",
    "MarksOp": "memkit.store._ops",
    "NamespacesOp": "memkit.store._ops",
    "Op": "memkit.store._ops",
    "PingOp": "memkit.store._ops",
    "PutMarksOp": "memkit.store._ops",
    "RecallsOp": "memkit.store._ops",
    "Record": "memkit._core._records",
    "RemoveMarksOp": "memkit.store._ops",
    "ResetOp": "memkit.store._ops",
    "RunsOp": "memkit.store._ops",
    "SearchOp": "memkit.store._ops",
    "StatsOp": "memkit.store._ops",
    "Store": "memkit.store._base",
    "TraceColumnsOp": "memkit.store._ops",
    "TracePayloadsOp": "memkit.store._ops",
    "ValuesOp": "memkit.store._ops",
    "WriteOp": "memkit.store._ops",
    "matches": "memkit._core._filters",
    "rank": "memkit.store._search",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memkit.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
