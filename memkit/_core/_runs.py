"""Workflow runs as one row each: the one place a run's figures are decided.

A run is the trace steps sharing ``(user_id, agent_id, workflow_id, run_id)``. Whoever reads its
steps (a store's :meth:`memkit.store._base.Store.run_summaries`, :func:`memkit.frames.runs_frame`,
TraceReplay, the charts, ``memkit runs`` and ``show``) hands them to :func:`summarise_rows` as
:data:`StepRow` tuples and shows the :class:`RunSummary` it returns: status, duration and its kind,
start, end, steps, failures, retries, first error, recalls, marks and the LLM usage totals. A store
that can read the rows in place answers in one query (SQLite); :func:`summaries` reads them from
any other store's public reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from memkit._core._errors import InvalidInputError
from memkit._core._items import status_of
from memkit._core._records import from_us, to_us
from memkit._core._timing import step_timing
from memkit._core._usage import Placed, Usage, place_of, usage_of

if TYPE_CHECKING:
    from memkit._core._port import MemoryProvider

__all__ = ["DURATION_KINDS", "STATUSES", "RunScope", "RunSummary", "Step", "StepRow", "StepUsage", "parse_run_key",
           "run_key", "run_status", "step_of", "step_usage", "summaries", "summarise", "summarise_rows",
           "summarise_runs", "timing_word"]

STATUSES = ("pending", "running", "success", "failed", "retrying", "skipped")
_RUNNING = frozenset(("running", "pending", "retrying"))
#: Records from which a store's columnar trace read (with numpy's and pandas' import, about 0.5 s
#: of CPU) costs less than reading every record (about 30 us each).
COLUMNS_FROM = 15_000
_MISSING = -(2**63)  # a missing number in trace columns
RunKey = tuple[str, str, str | None, str | None]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63 else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


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
    #: The ``step_index`` of the step it ran inside (``None``: top level, or not read).
    parent_step_index: int | None = None
    #: Its LLM usage (:func:`memkit._core._usage.usage_of`; empty where not read).
    usage: Usage = field(default_factory=Usage)
    #: Where it sits in its run's tree (:func:`memkit._core._usage.place_of`; unknown where not read).
    place: Placed = field(default_factory=Placed)

    @property
    def ended_at(self) -> datetime | None:
        if self.started_at is None or self.duration_s is None:
            return None
        return from_us(to_us(self.started_at) + round(self.duration_s * 1e6))

    @property
    def timing(self) -> str:
        return timing_word(self.started_at is not None, self.duration_s is not None)

    @property
    def run(self) -> RunKey:
        return (self.user_id, self.agent_id, self.workflow_id, self.run_id)

    def row(self, usage: StepUsage | None = None) -> StepRow:
        """What its run's summary reads of it (``usage``: as its run's totals count it; ``None``: not read)."""
        return (self.status, self.step_index, self.step_name, self.tool, _us(self.started_at),
                None if self.duration_s is None else round(self.duration_s * 1e6), self.retry_count, self.error,
                self.recalls or 0, to_us(self.created_at), usage)

    def as_json(self) -> dict[str, Any]:
        return {
            "step_id": self.id, "step_index": self.step_index, "step_name": self.step_name, "tool": self.tool,
            "status": self.status, "started_at": _iso(self.started_at), "duration_s": self.duration_s,
            "timing": self.timing, "retry_count": self.retry_count, "recalls": self.recalls, "error": self.error,
            "parent_step_index": self.parent_step_index, "model": self.usage.model,
            "tokens_in": self.usage.tokens_in, "tokens_out": self.usage.tokens_out,
            "tokens_total": self.usage.tokens_total, "cost": self.usage.cost,
        }


class RunScope(Protocol):
    """Which runs to read: of one namespace and/or workflow where given (``RunsOp`` is one)."""

    @property
    def user_id(self) -> str | None: ...

    @property
    def agent_id(self) -> str | None: ...

    @property
    def workflow_id(self) -> str | None: ...


def timing_word(started: bool, duration: bool) -> str:
    """Where a step's timing came from: ``recorded`` (a duration, in any spelling memkit reads, or a start
    and an end), ``start only`` or ``none`` (the trace panel then places it by step order)."""
    return "recorded" if duration else "start only" if started else "none"


def run_status(statuses: Iterable[str]) -> str:
    """A run's status from its steps' (their last attempts'): failed, else running, else unknown, else success."""
    seen = set(statuses)
    if "failed" in seen:
        return "failed"
    if seen.intersection(_RUNNING):
        return "running"
    return "unknown" if "unknown" in seen else "success"


#: ``duration_kind`` of a run: ``wall`` (every step recorded its start: last end minus first start),
#: ``sum of steps`` (some did not: the sum of its steps' durations) or ``unknown`` (no step's duration).
DURATION_KINDS = ("wall", "sum of steps", "unknown")

# -- run ids -------------------------------------------------------------------------------


def _escaped(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def run_key(user_id: str | None, agent_id: str | None, workflow_id: str | None, run_id: str | None) -> str:
    """A run's printed id: ``user/agent/workflow/run_id`` (``user/agent/workflow`` for a workflow without
    run ids), each part with ``%`` and ``/`` escaped as ``%25`` and ``%2F``. It names one run of one
    namespace, whatever else the store holds or later receives, and :func:`parse_run_key` reads it back."""
    parts = [user_id or "", agent_id or "", workflow_id or ""] + ([] if run_id is None else [run_id])
    return "/".join(map(_escaped, parts))


def _unescaped(part: str) -> str:
    return part.replace("%2F", "/").replace("%2f", "/").replace("%25", "%")


def parse_run_key(text: str) -> RunKey | None:
    """The ``(user_id, agent_id, workflow_id, run_id)`` a :func:`run_key` names; ``None`` for a text of
    another shape (a bare ``run_id``, or the ``workflow/run_id`` an older version printed)."""
    parts = text.split("/")
    if len(parts) not in (3, 4) or not parts[0] or not parts[1]:
        return None
    user, agent, workflow = (_unescaped(p) for p in parts[:3])
    return (user, agent, workflow or None, _unescaped(parts[3]) if len(parts) == 4 else None)


def _short(ids: RunKey) -> str:
    return (ids[2] or "") + ("" if ids[3] is None else f"/{ids[3]}")


def _run_of(ids: RunKey) -> str | None:
    return ids[3]


def _workflow_of(ids: RunKey) -> str | None:
    return ids[2]


def pick_key(keys: Iterable[tuple[str, RunKey]], name: str) -> str:
    """The printed id of the run ``name`` names among ``keys`` (printed id, ids): its printed id, else
    a ``workflow/run_id``, ``run_id`` or ``workflow_id`` that names exactly one of them."""
    if not isinstance(name, str):
        raise InvalidInputError(f"a run is named by its printed id or run_id, got {type(name).__name__}")
    listed = list(keys)
    if any(key == name for key, _ in listed):
        return name
    for shape in (_short, _run_of, _workflow_of):
        hits = [key for key, ids in listed if shape(ids) == name]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise InvalidInputError(f"{name!r} names {len(hits)} runs; use one of {sorted(hits)[:5]}")
    raise InvalidInputError(f"no run {name!r} in this store")


@dataclass
class RunSummary:
    """One run in one row: its namespace, ids and the figures of a :func:`memkit.frames.runs_frame` row."""

    user_id: str
    agent_id: str
    workflow_id: str | None
    run_id: str | None
    status: str
    #: The first start its steps recorded (``None``: none recorded one; never the time they were stored).
    started_at: datetime | None
    #: The last end (or start) its steps recorded (``None``: none recorded one).
    ended_at: datetime | None
    #: Seconds, as ``duration_kind`` says (``None``: unknown).
    duration_s: float | None
    #: One of :data:`DURATION_KINDS`.
    duration_kind: str
    #: Its steps: a step written once per attempt (``retrying`` rows, then its outcome) is one step.
    steps: int
    failed_steps: int
    retries: int
    #: Searches its steps made (``None``: the store keeps no recalls).
    recalls: int | None
    first_error: str | None
    #: Its distinct tools, sorted, joined by ``", "``.
    tools: str
    #: How many of its steps a researcher marked, by label (``good``, ``bad``).
    marks: dict[str, int] = field(default_factory=dict)
    #: Its trace records (an attempt written on its own row is one).
    rows: int = 0
    #: Its LLM usage, where its steps' usage was read (else empty and ``None``): the models its steps
    #: named, sorted; the sums over the steps whose usage counts (``None``: none recorded the figure);
    #: the sessions and tags its steps named, sorted.
    models: tuple[str, ...] = ()
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_total: int | None = None
    cost: float | None = None
    sessions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Its printed id (:func:`run_key`)."""
        return run_key(self.user_id, self.agent_id, self.workflow_id, self.run_id)

    @property
    def ids(self) -> RunKey:
        return (self.user_id, self.agent_id, self.workflow_id, self.run_id)

    def as_json(self) -> dict[str, Any]:
        """Its figures as ``memkit runs --json`` prints them (its usage apart: :meth:`usage_json`)."""
        return {
            "run": self.key, "workflow_id": self.workflow_id, "run_id": self.run_id, "user_id": self.user_id,
            "agent_id": self.agent_id, "status": self.status, "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at), "duration_s": self.duration_s, "duration_kind": self.duration_kind,
            "steps": self.steps, "failed_steps": self.failed_steps, "retries": self.retries,
            "recalls": self.recalls, "first_error": self.first_error, "marks": dict(sorted(self.marks.items())),
        }

    def usage_json(self) -> dict[str, Any]:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "tokens_total": self.tokens_total,
                "cost": self.cost, "models": list(self.models)}


#: A step's LLM usage as its run's totals read it, a plain tuple as :data:`StepRow` is: ``(model,
#: tokens_in, tokens_out, tokens_total, cost, counted, session, tags)``, ``cost`` priced where the
#: caller had prices, ``counted`` whether it counts in its run's totals
#: (:func:`memkit._core._usage.counted_steps`).
StepUsage = tuple[str | None, int | None, int | None, int | None, float | None, bool, str | None, tuple[str, ...]]


def step_usage(usage: Usage, counted: bool) -> StepUsage:
    return (usage.model, usage.tokens_in, usage.tokens_out, usage.tokens_total, usage.cost, counted, None, ())


#: What a run's summary reads of one step, a plain tuple (one is made per step: a class's
#: constructor would cost more than the summary): ``(status as shown, step_index, step_name, tool,
#: started_us, duration_us, retry_count, error, recalls, created_us, usage)``, times in epoch
#: microseconds, ``created_us`` (when it was stored) only ordering runs whose start is unknown, never
#: read as a start; ``usage`` ``None`` where it was not read.
StepRow = tuple[str, int | None, str | None, str | None, int | None, int | None, int | None, str | None, int, int,
                StepUsage | None]


def _summary(key: RunKey, rows: list[StepRow], marks: dict[str, int], recalls_kept: bool) -> RunSummary:
    """The one place a run's figures are decided from its steps, in the order they were written.

    A row that is not an outcome (``running``, ``pending``, ``retrying``) followed later by a row of the
    same step (same ``step_name``, else ``step_index``) was an attempt: the step is its last row, and
    its retries are at least the attempts written as ``retrying``. Timing covers every row."""
    open_rows: dict[Any, int] = {}  # a step's unfinished row: its position in ``final``
    attempts: Counter[Any] = Counter()
    final: list[tuple[str, int | None, str | None, int] | None] = []  # (status, retry_count, error, attempts)
    first = last = None
    timed = total = durations = 0
    tools: set[str] = set()
    recalls: dict[Any, int] = {}
    models: set[str] = set()
    sessions: set[str] = set()
    tags: set[str] = set()
    sums: list[Any] = [None, None, None, None]  # tokens in, out, total, cost of the steps that count
    for status, index, name, tool, started, duration, retries, error, found, _, use in rows:
        same = name if name is not None else index
        if same is not None:
            before = open_rows.pop(same, None)
            if before is not None:  # a later row of its step: that row was an attempt
                if final[before][0] == "retrying":  # type: ignore[index]
                    attempts[same] += 1
                final[before] = None
            if status in _RUNNING:
                open_rows[same] = len(final)
                final.append((status, retries, error, 0))
            else:
                final.append((status, retries, error, attempts.pop(same, 0)))
        else:
            final.append((status, retries, error, 0))
        if started is not None:
            end = started + (duration or 0)
            first = started if first is None or started < first else first
            last = end if last is None or end > last else last
            timed += 1
        if duration is not None:
            total += duration
            durations += 1
        if tool is not None:
            tools.add(tool)
        if found and index is not None:  # recalls are kept by step index: a step's attempts share them
            recalls[index] = found
        if use is not None:  # every attempt counts: each called the model
            if use[0] is not None:
                models.add(use[0])
            if use[6] is not None:
                sessions.add(use[6])
            tags.update(use[7])
            if use[5]:
                for k in range(4):
                    if (value := use[k + 1]) is not None:
                        sums[k] = value if sums[k] is None else sums[k] + value
    for same, at in open_rows.items():  # still on an unfinished row: its earlier attempts count
        status, retries, error, _ = final[at]  # type: ignore[misc]
        final[at] = (status, retries, error, attempts.pop(same, 0))
    statuses: set[str] = set()
    steps = failed = retried = 0
    first_error = None
    for row in final:
        if row is None:
            continue
        status, retries, error, extra = row
        steps += 1
        statuses.add(status)
        if retries or extra:
            retried += max(retries or 0, extra)
        if status == "failed":
            failed += 1
            if first_error is None:
                first_error = error
    if timed == len(rows):
        kind, seconds = "wall", (last - first) / 1e6  # type: ignore[operator]
    elif durations:
        kind, seconds = "sum of steps", total / 1e6
    else:
        kind, seconds = "unknown", None
    return RunSummary(
        *key, status=run_status(statuses),
        started_at=None if first is None else from_us(first), ended_at=None if last is None else from_us(last),
        duration_s=seconds, duration_kind=kind, steps=steps, failed_steps=failed, retries=retried,
        recalls=sum(recalls.values()) if recalls_kept else None, first_error=first_error,
        tools=", ".join(sorted(tools)), marks=dict(sorted(marks.items())), rows=len(rows),
        models=tuple(sorted(models)), tokens_in=sums[0], tokens_out=sums[1], tokens_total=sums[2], cost=sums[3],
        sessions=tuple(sorted(sessions)), tags=tuple(sorted(tags)),
    )


def summarise_rows(
    rows: Iterable[tuple[RunKey, StepRow]], marks: dict[RunKey, Counter[str]] | dict[RunKey, dict[str, int]]
    | None = None, *, recalls_kept: bool = True,
) -> list[RunSummary]:
    """One row per run of ``rows`` (each step with its run, in the order written): see :func:`summarise_runs`."""
    grouped: dict[RunKey, list[StepRow]] = {}
    for key, row in rows:
        group = grouped.get(key)
        if group is None:
            grouped[key] = [row]
        else:
            group.append(row)
    return summarise_runs(grouped.items(), marks, recalls_kept=recalls_kept)


def summarise_runs(
    runs: Iterable[tuple[RunKey, list[StepRow]]], marks: dict[RunKey, Counter[str]] | dict[RunKey, dict[str, int]]
    | None = None, *, recalls_kept: bool = True,
) -> list[RunSummary]:
    """One row per run (its steps in the order written, runs in the order of their first steps): newest
    start first, runs whose start is unknown last, by when their first step was stored; ties keep the
    order given. Every run summary (the generic reads, SQLite's packed numbers,
    :func:`memkit.frames.runs_frame`) is made here."""
    known: list[tuple[int, RunSummary]] = []
    unknown: list[tuple[int, RunSummary]] = []
    for key, group in runs:
        summary = _summary(key, group, dict((marks or {}).get(key, {})), recalls_kept)
        if summary.started_at is None:
            unknown.append((-group[0][9], summary))
        else:
            known.append((-to_us(summary.started_at), summary))
    known.sort(key=lambda pair: pair[0])  # stable
    unknown.sort(key=lambda pair: pair[0])
    return [summary for _, summary in known + unknown]


def step_of(item: Any, counts: dict[tuple[Any, ...], int] | None) -> Step:
    """A stored trace record (a record or a memory item) as a step; ``counts``: recalls per step."""
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
        status=status_of(status), error=_text(trace.get("error")),
        retry_count=_int(trace.get("retry_count")), created_at=item.created_at, started_at=start,
        duration_s=duration, parent_step_index=_int(trace.get("parent_step_index")), usage=usage_of(trace),
        place=place_of(trace),
    )
    if counts is not None:
        step.recalls = counts.get((*step.run, step.step_index), 0)
    return step


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
            status=status_of(status), error=error,
            retry_count=None if retries == _MISSING else retries, created_at=from_us(created),
            started_at=None if started == _MISSING else from_us(started),
            duration_s=None if duration == _MISSING else duration / 1e6,
        )
        if counts is not None:
            step.recalls = counts.get((user, agent, workflow, run, step.step_index), 0)
        steps.append(step)
    return steps


def _us(moment: datetime | None) -> int | None:
    return None if moment is None else to_us(moment)


def summarise(
    steps: list[Step], marks: dict[RunKey, Counter[str]] | None = None, *, recalls_kept: bool = True
) -> list[RunSummary]:
    """One row per run of ``steps`` (their ``recalls`` counted already), newest first."""
    steps = sorted(steps, key=lambda s: s.created_at)  # replay order: the order they were stored
    return summarise_rows(((s.run, s.row()) for s in steps), marks, recalls_kept=recalls_kept)


async def _many_records(provider: MemoryProvider, user_id: str | None, agent_id: str | None) -> bool:
    """Whether the store reads traces as columns and holds more records than :data:`COLUMNS_FROM`."""
    from memkit._core._port import SupportsNamespaces, SupportsTraceColumns

    if not isinstance(provider, SupportsTraceColumns) or not isinstance(provider, SupportsNamespaces):
        return False
    total = sum(ns.count for ns in await provider.namespaces()
                if user_id in (None, ns.user_id) and agent_id in (None, ns.agent_id))
    return total > COLUMNS_FROM


async def recall_counts(provider: MemoryProvider, workflow_id: str | None) -> dict[tuple[Any, ...], int] | None:
    """Searches per step, keyed by the step's namespace, workflow, run and index (``None``: none kept)."""
    from memkit._core._port import SupportsRecallCounts, SupportsRecalls
    from memkit._core._recalls import step_namespace

    if isinstance(provider, SupportsRecallCounts):
        rows = await provider.recall_step_counts(workflow_id)
        return {tuple(row[:5]): int(row[5]) for row in rows}
    if not isinstance(provider, SupportsRecalls):
        return None
    counts: Counter[tuple[Any, ...]] = Counter()
    for recall in await provider.recalls(workflow_id=workflow_id):
        if recall.step_index is not None:
            counts[(*step_namespace(recall), recall.workflow_id, recall.run_id, recall.step_index)] += 1
    return dict(counts)


async def summaries(
    provider: MemoryProvider, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None
) -> list[RunSummary]:
    """Every run of ``provider`` (or of one namespace or workflow), newest first, from its public reads:
    its records (as columns on a big store that offers them), its recalls and its marks."""
    from memkit._core._port import SupportsExport, SupportsMarks, SupportsTraceColumns

    if not isinstance(provider, SupportsExport):
        raise NotImplementedError(f"{provider!r} cannot list its records (no export()), which runs need")
    counts = await recall_counts(provider, workflow_id)
    steps: list[Step] = []
    if await _many_records(provider, user_id, agent_id):
        assert isinstance(provider, SupportsTraceColumns)
        columns = await provider.trace_columns(workflow_id=workflow_id, agent_id=agent_id, user_id=user_id)
        steps = _steps_of_columns(columns, counts)
    else:
        async for item in provider.export(user_id, agent_id):
            meta = item.metadata
            if meta.get("type") == "trace" and (workflow_id is None or meta.get("workflow_id") == workflow_id):
                steps.append(step_of(item, counts))
    marks: dict[RunKey, Counter[str]] = {}
    if isinstance(provider, SupportsMarks) and steps:
        for mark in await provider.marks(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id):
            if mark.kind == "step":
                marks.setdefault((mark.user_id, mark.agent_id, mark.workflow_id, mark.run_id), Counter())[
                    mark.label] += 1
    return summarise(steps, marks, recalls_kept=counts is not None)
