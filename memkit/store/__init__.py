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
