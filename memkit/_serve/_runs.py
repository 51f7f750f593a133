"""Workflow runs read straight from a provider, without pandas: what ``memkit runs`` and ``show`` print.

A run is the trace steps sharing ``(user_id, agent_id, workflow_id, run_id)``, with the ids,
figures and status of :func:`memkit.frames.runs_frame` (a test holds the two equal on a store
written the way an agent writes it). The command line reads them here in one pass over the
provider's records, so a command pays neither pandas' nor numpy's import (most of its time on a
store of a few thousand records). Past :data:`COLUMNS_FROM` records that pass costs more than
those imports, and a store with a columnar trace read (:class:`memkit.SupportsTraceColumns`) is
read that way instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memkit._core._errors import InvalidInputError
from memkit._core._port import (
    MemoryProvider,
    SupportsExport,
    SupportsMarks,
    SupportsNamespaces,
    SupportsRecalls,
    SupportsTraceColumns,
)
from memkit._core._records import from_us, to_us
from memkit._recall._marks import Mark
from memkit._recall._recording import Recall, step_namespace
from memkit.traces._timing import step_timing

__all__ = ["Run", "RunDetail", "Step", "pick_run", "read_run", "read_runs"]

#: Records from which a store's columnar trace read (with numpy's and pandas' import, about 0.5 s
#: of CPU) costs less than reading every record (about 30 us each).
COLUMNS_FROM = 15_000
_MISSING = -(2**63)  # a missing number in trace columns
STATUSES = ("pending", "running", "success", "failed", "retrying", "skipped")
_RUNNING = ("running", "pending", "retrying")
RunKey = tuple[str | None, str | None, str | None, str | None]


@runtime_checkable
class _CountsRecalls(Protocol):
    """A store that counts recalls per step in place (SQLite: one ``GROUP BY``, no recall parsed)."""

    async def recall_step_counts(
        self, workflow_id: str | None = None, *, user_id: str | None = None, agent_id: str | None = None
    ) -> list[tuple[Any, ...]]: ...


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63 else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class Step:
    """One trace step as a run shows it (``status`` as shown: a missing or unknown one reads ``unknown``)."""

    id: str
    user_id: str
    agent_id: str
    workflow_id: str | None
    run_id: str | None
    step_index: int | None
    step_name: str | None
    tool: str | None
    status: str
    error: str | None
    retry_count: int | None
    created_at: datetime
    #: From the step's own timing (any spelling memkit reads); ``None`` when it recorded none.
    started_at: datetime | None
    duration_s: float | None
    #: Searches the step made (``None``: the store keeps no recalls).
    recalls: int | None = None

    @property
    def ended_at(self) -> datetime | None:
        if self.started_at is None or self.duration_s is None:
            return None
        return from_us(to_us(self.started_at) + round(self.duration_s * 1e6))

    @property
    def timing(self) -> str:
        """``recorded``, ``start only`` or ``none`` (as :func:`memkit.frames.run_steps` says)."""
        return "recorded" if self.duration_s is not None else "start only" if self.started_at is not None else "none"

    def as_json(self) -> dict[str, Any]:
        return {
            "step_id": self.id, "step_index": self.step_index, "step_name": self.step_name, "tool": self.tool,
            "status": self.status, "started_at": _iso(self.started_at), "duration_s": self.duration_s,
            "timing": self.timing, "retry_count": self.retry_count, "recalls": self.recalls, "error": self.error,
        }


@dataclass
class Run:
    """One run: its steps in replay order and the figures of a :func:`memkit.frames.runs_frame` row."""

    key: str
    user_id: str | None
    agent_id: str | None
    workflow_id: str | None
    run_id: str | None
    steps: list[Step]
    recalls: int | None
    #: How many of its steps a researcher marked, by label (``good``, ``bad``).
    marks: Counter[str] = field(default_factory=Counter)

    @property
    def started_at(self) -> datetime:
        return min(s.started_at or s.created_at for s in self.steps)

    @property
    def ended_at(self) -> datetime:
        return max(s.ended_at or s.started_at or s.created_at for s in self.steps)

    @property
    def duration_s(self) -> float:
        return (self.ended_at - self.started_at).total_seconds()

    @property
    def failed_steps(self) -> int:
        return sum(s.status == "failed" for s in self.steps)

    @property
    def retries(self) -> int:
        return sum(s.retry_count or 0 for s in self.steps)

    @property
    def first_error(self) -> str | None:
        return next((s.error for s in self.steps if s.status == "failed" and s.error is not None), None)

    @property
    def status(self) -> str:
        statuses = {s.status for s in self.steps}
        if "failed" in statuses:
            return "failed"
        if statuses.intersection(_RUNNING):
            return "running"
        return "unknown" if "unknown" in statuses else "success"

    @property
    def tools(self) -> str:
        return ", ".join(sorted({s.tool for s in self.steps if s.tool is not None}))

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.key, "workflow_id": self.workflow_id, "run_id": self.run_id, "user_id": self.user_id,
            "agent_id": self.agent_id, "status": self.status, "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at), "duration_s": self.duration_s, "steps": len(self.steps),
            "failed_steps": self.failed_steps, "retries": self.retries, "recalls": self.recalls,
            "first_error": self.first_error, "marks": dict(sorted(self.marks.items())),
        }


@dataclass
class RunDetail:
    """One run with what its steps recalled and the marks on its steps and recalled memories."""

    run: Run
    recalls: list[Recall]
    marks: list[Mark]


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _step(item: Any, counts: dict[tuple[Any, ...], int] | None) -> Step:
    # add_trace stores every spelling of a step's timing as ``timestamp`` and ``duration`` beside the
    # agent's own keys: read those, as the stores' indexes do.
    meta = item.metadata
    trace = meta.get("trace") or {}
    start_s, duration_s = _number(trace.get("timestamp")), _number(trace.get("duration"))
    if start_s is None and duration_s is None:  # a step stored before timing was made canonical on write
        timing = step_timing(trace, warn=False)  # (its odd keys were warned about when it was written)
        start_s, duration_s = timing.start, timing.duration
    start = None if start_s is None else from_us(round(start_s * 1e6))
    duration = None if duration_s is None else round(duration_s * 1e6) / 1e6
    status = trace.get("status")
    step = Step(
        id=item.id, user_id=item.user_id, agent_id=item.agent_id, workflow_id=_text(meta.get("workflow_id")),
        run_id=_text(meta.get("run_id")), step_index=_int(trace.get("step_index")),
        step_name=_text(trace.get("step_name")), tool=_text(trace.get("tool")),
        status=status if status in STATUSES else "unknown", error=_text(trace.get("error")),
        retry_count=_int(trace.get("retry_count")), created_at=item.created_at, started_at=start,
        duration_s=duration,
    )
    if counts is not None:
        step.recalls = counts.get((step.user_id, step.agent_id, step.workflow_id, step.run_id, step.step_index), 0)
    return step


async def _many_records(provider: MemoryProvider, user_id: str | None, agent_id: str | None) -> bool:
    """Whether the store reads traces as columns and holds more records than :data:`COLUMNS_FROM`."""
    if not isinstance(provider, SupportsTraceColumns) or not isinstance(provider, SupportsNamespaces):
        return False
    total = sum(ns.count for ns in await provider.namespaces()
                if user_id in (None, ns.user_id) and agent_id in (None, ns.agent_id))
    return total > COLUMNS_FROM


def _steps_of_columns(columns: dict[str, Any], counts: dict[tuple[Any, ...], int] | None) -> list[Step]:
    """Steps from :meth:`memkit.SupportsTraceColumns.trace_columns` (numbers: int64, missing = its minimum)."""
    cells = {name: values if isinstance(values, list) else values.tolist() for name, values in columns.items()
             if name in ("id", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status", "error",
                         "created_us", "step_index", "started_us", "duration_us", "retry_count")}
    steps = []
    for row in zip(*(cells[name] for name in (
            "id", "user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name", "tool", "status",
            "error", "retry_count", "created_us", "started_us", "duration_us")), strict=True):
        (id_, user, agent, workflow, run, index, name, tool, status, error, retries, created, started,
         duration) = row
        step = Step(
            id=id_, user_id=user, agent_id=agent, workflow_id=workflow, run_id=run,
            step_index=None if index == _MISSING else index, step_name=name, tool=tool,
            status=status if status in STATUSES else "unknown", error=error,
            retry_count=None if retries == _MISSING else retries, created_at=from_us(created),
            started_at=None if started == _MISSING else from_us(started),
            duration_s=None if duration == _MISSING else duration / 1e6,
        )
        if counts is not None:
            step.recalls = counts.get((user, agent, workflow, run, step.step_index), 0)
        steps.append(step)
    return steps


async def _recall_counts(provider: MemoryProvider, workflow_id: str | None) -> dict[tuple[Any, ...], int] | None:
    """Searches per step, keyed by the step's namespace, workflow, run and index (``None``: none kept)."""
    if isinstance(provider, _CountsRecalls):
        rows = await provider.recall_step_counts(workflow_id)
        return {tuple(row[:5]): int(row[5]) for row in rows}
    if not isinstance(provider, SupportsRecalls):
        return None
    counts: Counter[tuple[Any, ...]] = Counter()
    for recall in await provider.recalls(workflow_id=workflow_id):
        if recall.step_index is not None:
            counts[(*step_namespace(recall), recall.workflow_id, recall.run_id, recall.step_index)] += 1
    return dict(counts)


def _keys(runs: list[Run]) -> None:
    """A readable id per run: ``workflow/run_id`` (the namespace in front only where two would collide)."""
    plain = [(r.workflow_id or "") + ("" if r.run_id is None else f"/{r.run_id}") for r in runs]
    seen = Counter(plain)
    for run, key in zip(runs, plain, strict=True):
        run.key = key if seen[key] == 1 else f"{run.user_id or ''}/{run.agent_id or ''}/{key}"


async def read_runs(
    provider: MemoryProvider,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
) -> list[Run]:
    """Every run of the store (or of one namespace or workflow), newest first."""
    if not isinstance(provider, SupportsExport):
        raise NotImplementedError(f"{provider!r} cannot list its records (no export()), which runs need")
    counts = await _recall_counts(provider, workflow_id)
    steps: list[Step] = []
    if await _many_records(provider, user_id, agent_id):
        assert isinstance(provider, SupportsTraceColumns)
        columns = await provider.trace_columns(workflow_id=workflow_id, agent_id=agent_id, user_id=user_id)
        steps = _steps_of_columns(columns, counts)
    else:
        async for item in provider.export(user_id, agent_id):
            meta = item.metadata
            if meta.get("type") == "trace" and (workflow_id is None or meta.get("workflow_id") == workflow_id):
                steps.append(_step(item, counts))
    steps.sort(key=lambda s: s.created_at)  # replay order: the order they were stored
    grouped: dict[RunKey, list[Step]] = {}
    for step in steps:
        grouped.setdefault((step.user_id, step.agent_id, step.workflow_id, step.run_id), []).append(step)
    runs = [Run("", *key, steps=group, recalls=None if counts is None else sum(s.recalls or 0 for s in group))
            for key, group in grouped.items()]
    _keys(runs)
    if isinstance(provider, SupportsMarks) and runs:
        by_run = {(r.user_id, r.agent_id, r.workflow_id, r.run_id): r for r in runs}
        for mark in await provider.marks(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id):
            run = by_run.get((mark.user_id, mark.agent_id, mark.workflow_id, mark.run_id))
            if run is not None and mark.kind == "step":
                run.marks[mark.label] += 1
    return sorted(runs, key=lambda r: r.started_at, reverse=True)  # stable: ties keep first-seen order


def filter_runs(
    runs: Iterable[Run], *, status: str | None = None, since: datetime | None = None, until: datetime | None = None
) -> list[Run]:
    return [r for r in runs if (status is None or r.status == status)
            and (since is None or r.started_at >= since) and (until is None or r.started_at <= until)]


def pick_run(runs: list[Run], name: str) -> Run:
    """The run ``name`` names: its id, or a ``run_id`` / ``workflow_id`` naming exactly one run."""
    for run in runs:
        if run.key == name:
            return run
    for attribute in ("run_id", "workflow_id"):
        hits = [r for r in runs if getattr(r, attribute) == name]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise InvalidInputError(f"{name!r} names {len(hits)} runs; use one of {sorted(r.key for r in hits)[:5]}")
    raise InvalidInputError(f"no run {name!r} in this store")


def _workflows_in(name: str) -> set[str]:
    """Every workflow id a run whose id is ``name`` can have: its id is ``[user/agent/]workflow[/run_id]``."""
    parts = name.split("/")
    return {"/".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}


async def _run_by_id(provider: MemoryProvider, name: str) -> Run | None:
    """The run whose id is ``name``, read workflow by workflow (indexed reads) on a big columnar store.

    Every run that could share that id (or make it need its namespace in front) belongs to one
    of the workflows named in it, so reading those is enough to tell."""
    if "/" not in name or not await _many_records(provider, None, None):
        return None
    runs = [run for workflow in sorted(_workflows_in(name)) for run in await read_runs(provider, workflow_id=workflow)]
    _keys(runs)
    found = [run for run in runs if run.key == name]
    return found[0] if len(found) == 1 else None


async def read_run(provider: MemoryProvider, name: str) -> RunDetail:
    """One run by name (see :func:`pick_run`), with its recalls and the marks on it."""
    run = await _run_by_id(provider, name) or pick_run(await read_runs(provider), name)
    recalls: list[Recall] = []
    if isinstance(provider, SupportsRecalls) and run.workflow_id is not None:
        recalls = [r for r in await provider.recalls(workflow_id=run.workflow_id, run_id=run.run_id)
                   if r.run_id == run.run_id and step_namespace(r) == (run.user_id, run.agent_id)]
    marks: list[Mark] = []
    if isinstance(provider, SupportsMarks) and run.workflow_id is not None:
        steps = {s.id for s in run.steps}
        recalled = {r.id for r in recalls}
        marks = [m for m in await provider.marks(workflow_id=run.workflow_id, run_id=run.run_id)
                 if m.step_id in steps or m.recall_id in recalled]
    return RunDetail(run, recalls, marks)
