"""Workflow runs read straight from a store, without pandas: what ``memkit runs`` and ``show`` print.

A run is listed as its :class:`memkit._core._runs.RunSummary`, the store's run summaries (one row
per run: SQLite reads them without reading a record's JSON; any other store from its records), so a
command pays neither pandas' nor numpy's import; ``show`` (and ``runs --usage``) then read the steps
of the runs they show and summarise them again, with their usage.

Everything is read through :class:`memkit._core._reads.OneShotReads`: a store's own one-shot reads
where it offers them (SQLite: no models, no event loop), else :class:`PortReads` over its port; both
answer in the same types (a recall and a mark as stores keep them, a model's fields as a dict).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memkit._core._runs import RunSummary, Step, parse_run_key, pick_key, step_of, step_usage, summarise_rows
from memkit._core._usage import Prices, Usage, counted_steps

if TYPE_CHECKING:
    from types import TracebackType

    from memkit._core._port import MemoryProvider
    from memkit._core._reads import OneShotReads
    from memkit._sync import Memory

__all__ = ["PortReads", "RunDetail", "RunUsage", "Step", "filter_runs", "open_reads", "pick_run", "port_reads",
           "read_run", "read_runs", "runs_usage"]

@dataclass
class RunDetail:
    """One run with its steps in replay order, what they recalled and the marks on them."""

    run: RunSummary
    steps: list[Step]
    #: Its recalls as stores keep them (:func:`memkit._recall._recording.body_of`), oldest first.
    recalls: list[dict[str, Any]]
    #: The marks on its steps and recalls (``Mark``'s JSON), oldest first.
    marks: list[dict[str, Any]]

    def priced(self, prices: Prices | None) -> RunUsage:
        """Its steps' usage priced with ``prices`` (where they recorded no cost) and its totals, each LLM
        call counted once (:func:`memkit._core._usage.counted_steps`)."""
        steps = [s.usage.priced(prices) for s in self.steps]
        counted = counted_steps((s.place, u.carried) for s, u in zip(self.steps, steps, strict=True))
        rows = ((s.run, s.row(step_usage(u, c))) for s, u, c in zip(self.steps, steps, counted, strict=True))
        return RunUsage(steps, counted, next(iter(summarise_rows(rows)), self.run))


@dataclass
class RunUsage:
    """A run's LLM usage as ``memkit show`` prints it: per step (priced), and in total: the summary of
    its steps read with their usage (the run as listed, without usage, when none was read)."""

    steps: list[Usage]
    counted: list[bool]
    total: RunSummary

    def as_json(self) -> dict[str, Any]:
        return self.total.usage_json()


def read_runs(
    reads: OneShotReads,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
) -> list[RunSummary]:
    """Every run of the store (or of one namespace or workflow), newest first."""
    return reads.run_summaries(user_id, agent_id, workflow_id)


def filter_runs(
    runs: Iterable[RunSummary], *, status: str | None = None, since: datetime | None = None,
    until: datetime | None = None,
) -> list[RunSummary]:
    # A run whose start is unknown is in no time window.
    return [r for r in runs if (status is None or r.status == status)
            and (since is None or (r.started_at is not None and r.started_at >= since))
            and (until is None or (r.started_at is not None and r.started_at <= until))]


def pick_run(runs: list[RunSummary], name: str) -> RunSummary:
    """The run ``name`` names: its printed id, or a ``workflow/run_id``, ``run_id`` or ``workflow_id``
    naming exactly one run."""
    chosen = pick_key(((run.key, run.ids) for run in runs), name)
    return next(run for run in runs if run.key == chosen)


def _runs_named(reads: OneShotReads, name: str, user_id: str | None, agent_id: str | None) -> list[RunSummary]:
    """The runs ``name`` can name within the namespace asked for: the runs of a printed id's workflow
    (read by its namespace and workflow; a run without a run_id is read among them), else every run
    of that namespace."""
    ids = parse_run_key(name)
    if ids is not None and user_id in (None, ids[0]) and agent_id in (None, ids[1]):
        runs = read_runs(reads, user_id=ids[0], agent_id=ids[1], workflow_id=ids[2])
        if any(r.key == name for r in runs):
            return runs
    return read_runs(reads, user_id=user_id, agent_id=agent_id)


def _step_namespace(recall: dict[str, Any]) -> tuple[str, str]:
    """:func:`memkit._core._recalls.step_namespace` of a recall as stores keep it."""
    return (recall.get("trace_user_id") or recall["user_id"], recall.get("trace_agent_id") or recall["agent_id"])


def _size(run: RunSummary, runs: list[RunSummary]) -> int:
    """The records to read for ``run``'s steps: a run without a run_id reads its workflow's steps without
    one (a run_id of another type included)."""
    return run.rows if run.run_id is not None else sum(r.rows for r in runs if r.ids[:3] == run.ids[:3])


def runs_usage(
    reads: OneShotReads, shown: list[RunSummary], runs: list[RunSummary], prices: Prices | None
) -> list[RunUsage]:
    """The usage of each run of ``shown`` (of the listed ``runs``), its steps read one run at a time."""
    return [RunDetail(run, reads.run_steps(run.ids, _size(run, runs)), [], []).priced(prices) for run in shown]


def read_run(reads: OneShotReads, name: str, user_id: str | None = None, agent_id: str | None = None) -> RunDetail:
    """One run by name (see :func:`pick_run`) within a namespace where given, with its steps, its
    recalls and the marks on it."""
    runs = _runs_named(reads, name, user_id, agent_id)
    run = pick_run(runs, name)
    steps = reads.run_steps(run.ids, _size(run, runs))
    recalls: list[dict[str, Any]] = []
    if reads.keeps_recalls:
        if run.workflow_id is not None:
            recalls = [r for r in reads.recalls(run.workflow_id, run.run_id)
                       if r.get("run_id") == run.run_id and _step_namespace(r) == (run.user_id, run.agent_id)]
        per_step = Counter(r.get("step_index") for r in recalls if r.get("step_index") is not None)
        for step in steps:
            step.recalls = 0 if step.step_index is None else per_step[step.step_index]
    marks: list[dict[str, Any]] = []
    if run.workflow_id is not None:
        ids = {s.id for s in steps}
        recalled = {r["id"] for r in recalls}
        marks = [m for m in reads.marks(run.workflow_id, run.run_id)
                 if m.get("step_id") in ids or m.get("recall_id") in recalled]
    return RunDetail(run, steps, recalls, marks)


def open_reads(url: str | None) -> OneShotReads:
    """What the command line reads ``url`` (``None``: the default store) through: the store's own
    one-shot reads where its adapter offers them for this file, else its port (:class:`PortReads`)."""
    from memkit.store._registry import default_url, one_shot_reads

    reads = one_shot_reads(url if url is not None else default_url())
    return reads if reads is not None else port_reads(url)


def port_reads(url: str | None) -> PortReads:
    """The store at ``url`` opened, read through its port."""
    import memkit

    return PortReads(memkit.open(url))


#: The most steps :class:`PortReads` reads through a filtered listing (a store's own bound on one listing).
_LISTED = 10_000


class PortReads:
    """:class:`memkit._core._reads.OneShotReads` over any store's port (on memkit's event loop)."""

    def __init__(self, memory: Memory) -> None:
        from memkit._core._port import SupportsMarks, SupportsRecalls

        self.memory = memory
        self.provider: MemoryProvider = memory.provider
        self.keeps_recalls = isinstance(self.provider, SupportsRecalls)
        self._keeps_marks = isinstance(self.provider, SupportsMarks)

    def __enter__(self) -> PortReads:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.memory.close()

    def run_summaries(
        self, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None
    ) -> list[RunSummary]:
        from memkit._sync import call

        return call(self.memory, _summaries, user_id, agent_id, workflow_id)

    def run_steps(self, ids: tuple[str, str, str | None, str | None], size: int) -> list[Step]:
        from memkit._sync import call

        return call(self.memory, _steps, ids, size)

    def recalls(self, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
        from memkit._recall._recording import body_of

        if not self.keeps_recalls:
            return []
        return [body_of(r) for r in self.memory.recalls(workflow_id=workflow_id, run_id=run_id)]

    def marks(self, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
        if not self._keeps_marks:
            return []
        return [m.model_dump(mode="json") for m in self.memory.marks(workflow_id=workflow_id, run_id=run_id)]

    def namespaces(self) -> list[dict[str, Any]]:
        return [ns.model_dump() for ns in self.memory.namespaces()]

    def stats(self) -> dict[str, Any]:
        return self.memory.stats().model_dump()

    def search(
        self, query: str, user_id: str, agent_id: str, limit: int, filters: Any, mode: str | None
    ) -> list[dict[str, Any]]:
        options = {"mode": mode} if mode else {}
        found = self.memory.search(query, user_id, agent_id, limit, filters, **options)  # type: ignore[arg-type]
        return [item.model_dump() for item in found]


async def _summaries(
    provider: MemoryProvider, user_id: str | None, agent_id: str | None, workflow_id: str | None
) -> list[RunSummary]:
    from memkit._core._port import SupportsExport
    from memkit._core._runs import summaries
    from memkit.store._base import Store

    if isinstance(provider, Store) and isinstance(provider, SupportsExport):
        return await provider.run_summaries(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)
    return await summaries(provider, user_id, agent_id, workflow_id)


async def _steps(provider: MemoryProvider, ids: tuple[str, str, str | None, str | None], size: int) -> list[Step]:
    """The steps of run ``ids`` in replay order, read through a filtered listing of its namespace."""
    from memkit._core._port import SupportsExport

    user_id, agent_id, workflow_id, run_id = ids
    filters: dict[str, Any] = {"type": "trace", "workflow_id": workflow_id}
    if run_id is not None:
        filters["run_id"] = run_id
    if size <= _LISTED:
        items = await provider.get_all(user_id, agent_id, size, filters)
        items.reverse()  # oldest first (ties: in the order written)
    else:
        assert isinstance(provider, SupportsExport)  # it listed its runs
        items = [i async for i in provider.export(user_id, agent_id)
                 if i.metadata.get("type") == "trace" and i.metadata.get("workflow_id") == workflow_id]
    steps = [s for s in (step_of(item, None) for item in items) if s.run == ids]
    steps.sort(key=lambda s: s.created_at)
    return steps
