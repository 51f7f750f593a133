"""What the command line reads of a store, one interface for every store, with one type per answer.

``memkit runs``, ``show``, ``namespaces``, ``stats`` and ``search`` read through :class:`OneShotReads`:
a store whose registry entry names a ``reads`` opener (see :mod:`memkit.store._registry`; SQLite)
answers them on the caller's thread without the models, pydantic or an event loop, which are most
of such a command's CPU (``bench/cli_reads.py``); any other store, and a file that store must open
first, answers through its port (:class:`memkit._serve._runs.PortReads`).

Whichever answers, each read gives one type, so a command prints the same either way without a
second copy of any model: a model's fields as a dict (what ``model_dump()`` gives: namespaces,
stats and search results, which the SQLite store builds its own models from), and a recall or a
mark as stores keep it (its JSON object; a recall's hits as ``[id, rank, score, details, content]``
arrays: :func:`memkit._recall._recording.body_of`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from types import TracebackType

    from memkit._core._runs import RunSummary, Step

__all__ = ["OneShotReads"]


class OneShotReads(Protocol):
    """The reads of ``memkit runs``, ``show``, ``namespaces`` and ``stats``, synchronous; a context
    manager that closes what it opened."""

    #: Whether the store records recalls (else a step's ``recalls`` stays ``None``: not kept).
    keeps_recalls: bool

    def run_summaries(
        self, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None
    ) -> list[RunSummary]:
        """What :meth:`memkit.store._base.Store.run_summaries` answers."""
        ...

    def run_steps(self, ids: tuple[str, str, str | None, str | None], size: int) -> list[Step]:
        """The steps of the run ``ids`` (``user_id, agent_id, workflow_id, run_id``) in replay order;
        ``size``: how many trace steps its workflow's listing holds (a run without a run_id: every
        step of the workflow without one)."""
        ...

    def recalls(self, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
        """Recalls of that workflow (and run, where given), oldest first, as stores keep them, or ``[]``
        where the store keeps none."""
        ...

    def marks(self, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
        """Marks of that workflow (and run), oldest first, as stores keep them (``Mark``'s JSON)."""
        ...

    def namespaces(self) -> list[dict[str, Any]]:
        """``NamespaceInfo``'s fields per namespace, sorted."""
        ...

    def stats(self) -> dict[str, Any]:
        """``memkit.Stats``' fields, in its order (what ``stats().model_dump()`` gives)."""
        ...

    def search(
        self, query: str, user_id: str, agent_id: str, limit: int, filters: Any, mode: str | None
    ) -> list[dict[str, Any]] | None:
        """``MemoryItem``'s fields of each result the store's ``search`` returns; ``None``: this search
        needs the store itself (then open it and ask its port)."""
        ...

    def __enter__(self) -> OneShotReads: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None: ...
