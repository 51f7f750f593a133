"""In: OTLP JSON span files as memkit runs (:func:`import_otlp`), checked whole before anything is written.

Reading and checking the spans is :mod:`._spans`, planning them as steps and recalls :mod:`._plan`
(both reused by the live processor).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memkit._core._errors import InvalidInputError
from memkit._core._port import (
    MemoryProvider,
    SupportsAddMany,
    SupportsImportSteps,
    SupportsPaging,
    SupportsRecalls,
)
from memkit._core._recalls import Recall
from memkit._core._records import Record
from memkit._core._validate import DEFAULT_LIMITS, Limits
from memkit._recall._recording import checked_recalls
from memkit._sync import Memory, call, provider_of
from memkit.otel._fit import record_of
from memkit.otel._plan import _json_or_text, _memory_of, _plan, _step_of
from memkit.otel._spans import _is_memory, _load, _parse, _Span
from memkit.store._base import Store
from memkit.store._ops import AddRecallsOp, ImportStepsOp, WriteOp

# Read here by older callers and tests: the parsing and planning names this module used to hold.
__all__ = ["OtlpImport", "_json_or_text", "_parse", "_step_of", "import_otlp"]


_NO_SPANS = "the OTLP trace file holds no span: nothing to import (is it the right file?)"


@dataclass
class OtlpImport:
    """What :func:`import_otlp` wrote: ``runs`` (one per trace), ``steps``, ``recalls`` and ``memories``."""

    runs: int = 0
    steps: int = 0
    recalls: int = 0
    run_ids: list[str] = field(default_factory=list)
    memories: int = 0  # ``create_memory`` spans of a memkit export, written back as memories
    # Steps whose payload was too big for the store's limits: their longest texts were cut, each
    # ending in memkit.otel.CUT_MARK, and the step says "truncated": true.
    truncated: int = 0


def import_otlp(
    mem: Memory | MemoryProvider,
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
) -> OtlpImport:
    """Import an OTLP JSON span file (one request, or JSON lines of them) as memkit runs.

    ``user_id``/``agent_id``/``workflow_id`` say where the runs go; left out, a file exported by
    memkit goes back where it came from, and a foreign one to ``user.id`` (else ``"system"``), the
    service name (else ``"otel"``) and its root span's service or name. The whole file is checked
    first; any bad span (a huge attribute, a parent cycle, an unknown kind, a bad timestamp) is an
    :class:`memkit.InvalidInputError` naming it, and nothing is written.
    """
    provider = provider_of(mem)
    # Checked once, here, against the store's own limits: a memkit store then writes the records as
    # they are instead of checking every one again (any other provider gets them through add_many).
    limits = provider.limits if isinstance(provider, Store) else DEFAULT_LIMITS
    spans: list[_Span] = []
    for request in _load(source):
        spans.extend(_parse(request))
    if not spans:
        raise InvalidInputError(_NO_SPANS)
    records = [_memory_of(s, user_id, agent_id, limits) for s in spans if _is_memory(s)]
    memories = len(records)
    # A store that writes planned steps as rows takes them (and the recalls as bodies) in one go; a
    # file that also holds memories goes the general way.
    rows = not memories and isinstance(provider, Store) and isinstance(provider, SupportsImportSteps)
    steps, recalls, runs = _plan([s for s in spans if not _is_memory(s)] if memories else spans,
                                 user_id, agent_id, workflow_id, bodies=rows)
    call(provider, _refuse_reimport, steps)
    if recalls and not isinstance(provider, SupportsRecalls):
        recalls = []
    cut: set[int] = set()
    for i, (user, agent, workflow, data) in enumerate(steps):
        records.append(_step_record(agent, workflow, data, user, limits, cut, i))
    if rows:
        written = call(provider, _import_steps, ImportStepsOp(tuple(records), tuple(recalls)))
        return OtlpImport(runs=len(runs), steps=len(steps), recalls=written, run_ids=runs, truncated=len(cut))
    checked = checked_recalls(recalls, limits)
    if not isinstance(provider, SupportsAddMany):
        raise InvalidInputError(f"{type(provider).__name__} cannot write a batch; import_otlp needs add_many")
    call(provider, _write, records, checked)
    return OtlpImport(runs=len(runs), steps=len(records) - memories, recalls=len(checked), run_ids=runs,
                      memories=memories, truncated=len(cut))


_IN_CHUNK = 500  # run ids a filter asks for at a time (filters take at most 1,000 values)


async def _refuse_reimport(provider: MemoryProvider, steps: list[tuple[str, str, str, dict[str, Any]]]) -> None:
    """Refuse a file one of whose runs (traces) already has steps in the namespace and workflow it
    would go to: imported again, its steps would be there twice."""
    if not isinstance(provider, SupportsPaging):
        return
    runs: dict[tuple[str, str, str], set[str]] = {}
    for user, agent, workflow, data in steps:
        run_id = data.get("run_id")
        if isinstance(run_id, str):
            runs.setdefault((user, agent, workflow), set()).add(run_id)
    for (user, agent, workflow), ids in runs.items():
        ordered = sorted(ids)
        for start in range(0, len(ordered), _IN_CHUNK):
            found = await provider.get_page(user, agent, limit=1, filters={
                "type": "trace", "workflow_id": workflow, "run_id": {"$in": ordered[start:start + _IN_CHUNK]}})
            if found:
                run_id = found[0].metadata.get("run_id")
                raise InvalidInputError(
                    f"run {run_id!r} of this file is already imported into user {user!r}, agent {agent!r},"
                    f" workflow {workflow!r}: a re-import is refused (it would store its steps twice);"
                    " delete that run's steps first, or import into another workflow_id")


def _step_record(
    agent: str, workflow: str, data: dict[str, Any], user: str, limits: Limits, cut: set[int], index: int
) -> Record:
    """Step ``index``'s record; one the store refuses for its payload is fitted (see :mod:`._fit`),
    and its index added to ``cut`` if a text was cut."""
    try:
        record, was_cut = record_of(agent, workflow, data, user, limits)
    except InvalidInputError as exc:
        raise InvalidInputError(f"span {data.get('span_id')} ({str(data.get('step_name'))[:60]!r}): {exc}") from None
    if was_cut:
        cut.add(index)
    return record


async def _import_steps(provider: MemoryProvider, op: ImportStepsOp) -> int:
    """Steps and recalls in one transaction, by the store's own rows (see ImportStepsOp)."""
    assert isinstance(provider, Store)
    return await provider.execute(op)


async def _write(provider: MemoryProvider, records: list[Record], recalls: list[Recall]) -> None:
    """Store an import's steps in one batch, then its recalls; a refused recall takes the steps back out.

    ``records`` and ``recalls`` were checked against the store's limits: a memkit store writes them
    as they are; another provider gets them through its own ``add_many`` and ``add_recalls``.
    """
    written: list[str] = []
    if isinstance(provider, Store):
        written = await provider.execute(WriteOp(tuple(records))) if records else []
    elif records:
        assert isinstance(provider, SupportsAddMany)
        written = await provider.add_many([
            {"id": r.id, "content": r.content, "user_id": r.user_id, "agent_id": r.agent_id,
             "metadata": r.metadata, "created_at": r.created_at}
            for r in records
        ])
    if recalls:
        assert isinstance(provider, SupportsRecalls)
        try:
            if isinstance(provider, Store):
                await provider.execute(AddRecallsOp(tuple(recalls)))
            else:
                await provider.add_recalls(recalls)
        except BaseException:
            for memory_id in written:  # nothing half-imported
                await provider.delete(memory_id)
            raise
