"""pandas views of a store: traces (one row per step), memories, namespaces, and audits.

Every function takes a provider or a :class:`memkit.Memory`. Trace frames follow the
convention of Arize Phoenix's spans DataFrame: one row per step, indexed by its id,
snake_case columns, and nested attributes flattened to dotted columns
(``params.<key>``, ``result.<key>``; lists and dicts stay as object cells).

Columns of :func:`traces_frame`, in this order: ``workflow_id, agent_id, user_id,
run_id, step_index, step_name, tool, status, started_at, ended_at, duration_s,
retry_count, error, created_at``, then ``params.*`` and ``result.*`` sorted by name.
``started_at``/``ended_at``/``created_at`` are tz-aware UTC; rows are in replay
order (the order the steps were stored).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from memkit import _recall
from memkit._display import status_of
from memkit._errors import InvalidInputError, NotFoundError
from memkit._models import MemoryItem
from memkit._protocols import (
    MemoryProvider,
    SupportsExport,
    SupportsGet,
    SupportsMarks,
    SupportsNamespaces,
    SupportsPaging,
    SupportsRecallCounts,
    SupportsRecalls,
    SupportsTraceColumns,
)
from memkit._recall import Recall, RecalledMemory
from memkit._records import to_us
from memkit._sync import Memory, provider_of, run_sync
from memkit._timing import step_timing
from memkit.traces import ExecutionHistory, ExecutionItem, ExecutionStatus, categorize_error

__all__ = [
    "ANNOTATION_COLUMNS",
    "RECALL_COLUMNS",
    "REPLAY_COLUMNS",
    "RUN_COLUMNS",
    "TRACE_COLUMNS",
    "ReplayState",
    "annotations_frame",
    "compare_runs",
    "failure_patterns",
    "filter_runs",
    "memories_frame",
    "namespaces_frame",
    "recall_counts",
    "recalls_frame",
    "replay",
    "replay_recall",
    "run_steps",
    "runs_frame",
    "tool_stats",
    "traces_frame",
]

TRACE_COLUMNS = (
    "workflow_id", "agent_id", "user_id", "run_id", "step_index", "step_name", "tool", "status",
    "started_at", "ended_at", "duration_s", "retry_count", "error", "created_at",
)
_TEXT = ("id", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status", "error")
_NUMBERS = ("seq", "created_us", "step_index", "started_us", "duration_us", "retry_count")


_provider = provider_of


def _since_us(since: datetime | str | float | None) -> int | None:
    if since is None:
        return None
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        return int(since * 1_000_000)
    stamp = pd.Timestamp(since)
    return to_us(stamp.to_pydatetime())


# -- traces --------------------------------------------------------------------------


_NA = np.iinfo(np.int64).min  # a missing number in trace columns; numpy reads it as NaT


def _int_or_na(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and _NA < value < 2**63 else _NA


async def _export_trace_columns(
    provider: MemoryProvider,
    workflow_id: str | None,
    agent_id: str | None,
    user_id: str | None,
    status: str | None,
    since_us: int | None,
) -> dict[str, Any]:
    """The generic path: stream ``export()`` and keep the traces, as columns."""
    if not isinstance(provider, SupportsExport):
        raise NotImplementedError(f"{provider!r} cannot list its records (no export()), which traces need")
    cols: dict[str, list[Any]] = {name: [] for name in (*_TEXT, *_NUMBERS)}
    extra: dict[str, dict[int, Any]] = {}
    stream: AsyncIterator[Any] = provider.export(user_id, agent_id)
    n = 0
    async for item in stream:
        meta = item.metadata
        if meta.get("type") != "trace":
            continue
        trace = meta.get("trace") or {}
        if workflow_id is not None and meta.get("workflow_id") != workflow_id:
            continue
        if status is not None and trace.get("status") != status:
            continue
        created_us = to_us(item.created_at) if item.created_at is not None else None
        if since_us is not None and (created_us is None or created_us < since_us):
            continue
        timing = step_timing(trace)
        stamp, duration = timing.start, timing.duration
        row = {
            "id": item.id, "user_id": item.user_id, "agent_id": item.agent_id,
            "workflow_id": meta.get("workflow_id"), "run_id": meta.get("run_id"),
            "step_name": trace.get("step_name"), "tool": trace.get("tool"), "status": trace.get("status"),
            "error": trace.get("error"), "seq": n, "created_us": created_us,
            "step_index": trace.get("step_index"), "retry_count": trace.get("retry_count"),
            "started_us": None if not isinstance(stamp, (int, float)) else round(stamp * 1e6),
            "duration_us": None if not isinstance(duration, (int, float)) else round(duration * 1e6),
        }
        for name, value in row.items():
            cols[name].append(value)
        for kind, key in (("params", "parameters"), ("result", "result")):
            nested = trace.get(key)
            if isinstance(nested, dict):
                for k, v in nested.items():
                    extra.setdefault(f"{kind}.{k}", {})[n] = v
        n += 1
    out: dict[str, Any] = dict(cols)
    for name in _NUMBERS:
        out[name] = np.fromiter((_int_or_na(v) for v in cols[name]), dtype=np.int64, count=n)
    for name, cells in sorted(extra.items()):
        out[name] = np.fromiter((cells.get(i) for i in range(n)), dtype=object, count=n)
    return out


def _nullable_int(values: np.ndarray) -> Any:
    return pd.arrays.IntegerArray(values, values == _NA)


def _utc(values: np.ndarray) -> pd.DatetimeIndex:
    return pd.DatetimeIndex(values.view("datetime64[us]")).tz_localize("UTC")


def _trace_frame(cols: dict[str, Any]) -> pd.DataFrame:
    """Columns from ``trace_columns`` (numbers as int64 arrays, missing = int64's minimum) -> frame."""
    n = len(cols["id"])
    created, seq = cols["created_us"], cols["seq"]
    later = (created[1:] > created[:-1]) | ((created[1:] == created[:-1]) & (seq[1:] > seq[:-1]))
    in_order = bool(n < 2 or np.all(later))
    order = None if in_order else np.lexsort((seq, created))

    def take(values: Any) -> Any:
        if order is None:
            return values
        if isinstance(values, np.ndarray):
            return values[order]
        return [values[i] for i in order]

    started, duration = take(cols["started_us"]), take(cols["duration_us"])
    missing = (started == _NA) | (duration == _NA)
    ended = np.where(missing, _NA, started + np.where(missing, 0, duration))
    index = pd.Index(take(cols["id"]), name="step_id", dtype=object)

    def text(name: str) -> pd.Series:  # pandas would infer its string dtype; cells stay str | None
        return pd.Series(take(cols[name]), index=index, dtype=object, copy=False)

    data: dict[str, Any] = {
        "workflow_id": text("workflow_id"),
        "agent_id": text("agent_id"),
        "user_id": text("user_id"),
        "run_id": text("run_id"),
        "step_index": _nullable_int(take(cols["step_index"])),
        "step_name": text("step_name"),
        "tool": text("tool"),
        "status": text("status"),
        "started_at": _utc(started),
        "ended_at": _utc(ended),
        "duration_s": np.where(duration == _NA, np.nan, duration / 1e6),
        "retry_count": _nullable_int(take(cols["retry_count"])),
        "error": text("error"),
        "created_at": _utc(take(created)),
    }
    frame = pd.DataFrame(data, index=index, copy=False)
    extras: dict[str, Any] = {}
    for name in sorted(k for k in cols if k.startswith(("params.", "result."))):
        cells = take(cols[name])
        if any(v is not None for v in cells):  # keys seen only in other workflows' steps
            # pandas would infer a string dtype; cells stay Python objects (lists stay lists).
            extras[name] = pd.Series(cells, index=index, dtype=object, copy=False)
    if extras:
        frame = pd.concat([frame, pd.DataFrame(extras, index=index)], axis=1)
    return frame


def traces_frame(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    agent_id: str | None = None,
    user_id: str | None = None,
    status: str | ExecutionStatus | None = None,
    since: datetime | str | float | None = None,
    *,
    recalls: bool = False,
) -> pd.DataFrame:
    """Every stored trace step as one row, in replay order (see the module docstring).

    Parameters
    ----------
    mem
        A provider or :class:`memkit.Memory`.
    workflow_id, agent_id, user_id, status
        Keep only matching steps.
    since
        Keep steps stored at or after this moment (datetime, ISO string or epoch seconds).
    recalls
        Add ``recalls`` (searches the step made) and ``recalled`` (memories they returned)
        per step, from a store that keeps recalls (see :func:`recall_counts`).

    Examples
    --------
    >>> df = traces_frame(mem, workflow_id="wf1")              # doctest: +SKIP
    >>> df.groupby("tool").duration_s.describe()               # doctest: +SKIP
    """
    provider = _provider(mem)
    state = None if status is None else ExecutionStatus(status).value
    since_us = _since_us(since)
    if isinstance(provider, SupportsTraceColumns):
        coro = provider.trace_columns(
            workflow_id=workflow_id, agent_id=agent_id, user_id=user_id, status=state, since_us=since_us
        )
    else:
        coro = _export_trace_columns(provider, workflow_id, agent_id, user_id, state, since_us)
    frame = _trace_frame(run_sync(coro))
    return _with_recall_counts(frame, provider) if recalls else frame


# -- memories and namespaces -----------------------------------------------------------


async def _collect(
    provider: MemoryProvider, user_id: str, agent_id: str, filters: dict[str, Any] | None
) -> list[Any]:
    if isinstance(provider, SupportsPaging):
        items: list[Any] = []
        offset = 0
        while True:
            page = await provider.get_page(user_id, agent_id, offset=offset, limit=1000, filters=filters)
            items.extend(page)
            if len(page) < 1000:
                return items
            offset += len(page)
    return await provider.get_all(user_id, agent_id, limit=10_000, filters=filters)


def memories_frame(
    mem: MemoryProvider | Memory,
    user_id: str,
    agent_id: str,
    *,
    filters: dict[str, Any] | None = None,
    include_traces: bool = True,
) -> pd.DataFrame:
    """One namespace's memories, newest first, indexed by ``memory_id``.

    Columns: ``user_id, agent_id, content, created_at`` (tz-aware UTC), then the metadata
    flattened to ``metadata.<key>`` (dotted paths for nested dicts; lists stay object cells).
    """
    provider = _provider(mem)
    items = run_sync(_collect(provider, user_id, agent_id, filters))
    if not include_traces:
        items = [i for i in items if i.metadata.get("type") != "trace"]
    base = pd.DataFrame(
        {
            "user_id": [i.user_id for i in items],
            "agent_id": [i.agent_id for i in items],
            "content": [i.content for i in items],
            "created_at": pd.to_datetime([i.created_at for i in items], utc=True),
        },
        index=pd.Index([i.id for i in items], name="memory_id", dtype=object),
    )
    if not items:
        return base
    meta = pd.json_normalize([i.metadata for i in items], sep=".")
    meta.columns = [f"metadata.{c}" for c in meta.columns]
    meta.index = base.index
    return pd.concat([base, meta[sorted(meta.columns)]], axis=1)


def namespaces_frame(mem: MemoryProvider | Memory) -> pd.DataFrame:
    """Every ``(user_id, agent_id)`` with ``count``, ``first_at`` and ``last_at``."""
    provider = _provider(mem)
    if not isinstance(provider, SupportsNamespaces):
        raise NotImplementedError(f"{provider!r} cannot list its namespaces")
    rows = run_sync(provider.namespaces())
    return pd.DataFrame(
        {
            "user_id": [r.user_id for r in rows],
            "agent_id": [r.agent_id for r in rows],
            "count": pd.array([r.count for r in rows], dtype="int64"),
            "first_at": pd.to_datetime([r.first_at for r in rows], utc=True),
            "last_at": pd.to_datetime([r.last_at for r in rows], utc=True),
        }
    )


# -- audits ------------------------------------------------------------------------------


def _frame(source: pd.DataFrame | MemoryProvider | Memory, **filters: Any) -> pd.DataFrame:
    return source if isinstance(source, pd.DataFrame) else traces_frame(source, **filters)


def tool_stats(source: pd.DataFrame | MemoryProvider | Memory, **filters: Any) -> pd.DataFrame:
    """Per tool: ``steps, successes, failures, success_rate, retries`` and duration
    ``duration_mean_s, duration_p50_s, duration_p90_s, duration_p99_s``.

    ``source`` is a :func:`traces_frame` or a store (``filters`` go to :func:`traces_frame`).
    """
    df = _frame(source, **filters)
    columns = [
        "steps", "successes", "failures", "success_rate", "retries",
        "duration_mean_s", "duration_p50_s", "duration_p90_s", "duration_p99_s",
    ]
    if df.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="tool"))
    grouped = df.groupby("tool", sort=True, dropna=False)
    duration = grouped["duration_s"]
    out = pd.DataFrame(
        {
            "steps": grouped.size(),
            "successes": grouped["status"].apply(lambda s: int((s == "success").sum())),
            "failures": grouped["status"].apply(lambda s: int((s == "failed").sum())),
            "retries": grouped["retry_count"].sum().astype("int64"),
            "duration_mean_s": duration.mean(),
            "duration_p50_s": duration.quantile(0.5),
            "duration_p90_s": duration.quantile(0.9),
            "duration_p99_s": duration.quantile(0.99),
        }
    )
    out["success_rate"] = out["successes"] / out["steps"]
    return out[columns]


def failure_patterns(source: pd.DataFrame | MemoryProvider | Memory, **filters: Any) -> pd.DataFrame:
    """Failed steps per category (the seed framework's: network_error, validation_error,
    parameter_error, criteria_failure, execution_error, unknown) and tool: ``category, tool, count``,
    most frequent first.
    """
    df = _frame(source, **filters)
    failed = df[df["status"] == "failed"]
    if failed.empty:
        return pd.DataFrame({"category": pd.Series(dtype=object), "tool": pd.Series(dtype=object),
                             "count": pd.Series(dtype="int64")})
    categories = {e: categorize_error(e) for e in failed["error"].unique()}
    cat = failed["error"].map(lambda e: categories[e])
    counts = (
        pd.DataFrame({"category": cat, "tool": failed["tool"]})
        .groupby(["category", "tool"], dropna=False).size().rename("count").reset_index()
    )
    return counts.sort_values(["count", "category", "tool"], ascending=[False, True, True], ignore_index=True)


@dataclass
class ReplayState:
    """The workflow as it stood after one step."""

    position: int
    """0 for the first step stored, then 1, 2, ..."""
    step: pd.Series
    """The step just taken (a :func:`traces_frame` row)."""
    steps: pd.DataFrame
    """Every step so far, this one included."""
    history: ExecutionHistory
    """The same steps as an :class:`~memkit.traces.ExecutionHistory` (summaries, failure patterns)."""


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _item(row: pd.Series) -> ExecutionItem:
    params = {k.split(".", 1)[1]: v for k, v in row.items() if isinstance(k, str) and k.startswith("params.")}
    result = {k.split(".", 1)[1]: v for k, v in row.items() if isinstance(k, str) and k.startswith("result.")}
    retry = row["retry_count"]
    return ExecutionItem(
        step_name=row["step_name"],
        tool=row["tool"],
        status=ExecutionStatus(status_of(row["status"])),
        result={k: v for k, v in result.items() if not _missing(v)} or None,
        error=None if _missing(row["error"]) else row["error"],
        timestamp=row["started_at"].timestamp() if pd.notna(row["started_at"]) else float("nan"),
        parameters={k: v for k, v in params.items() if not _missing(v)} or None,
        duration=None if pd.isna(row["duration_s"]) else float(row["duration_s"]),
        retry_count=0 if pd.isna(retry) else int(retry),
    )


def replay(
    mem: MemoryProvider | Memory | pd.DataFrame, workflow_id: str, **filters: Any
) -> Iterator[ReplayState]:
    """Walk one workflow step by step, yielding the state after each step.

    Examples
    --------
    >>> for state in replay(mem, "wf1"):                                  # doctest: +SKIP
    ...     print(state.position, state.step.step_name, state.history.get_failure_patterns())
    """
    if isinstance(mem, pd.DataFrame):
        df = mem[mem["workflow_id"] == workflow_id]
    else:
        df = traces_frame(mem, workflow_id=workflow_id, **filters)
    items: list[ExecutionItem] = []
    for position in range(len(df)):
        row = df.iloc[position]
        items.append(_item(row))
        # A fresh history per state, so a state kept by the caller never changes afterwards.
        history = ExecutionHistory(items=list(items), workflow_id=workflow_id)
        yield ReplayState(position=position, step=row, steps=df.iloc[: position + 1], history=history)


# -- runs --------------------------------------------------------------------------------

RUN_COLUMNS = (
    "workflow_id", "agent_id", "user_id", "run_id", "started_at", "ended_at", "duration_s", "steps",
    "failed_steps", "retries", "first_error", "status", "tools", "recalls",
)
"""Columns of :func:`runs_frame`, in order (``tools``: the tools the run used, comma-separated;
``recalls``: the searches its steps made, ``<NA>`` on a store that keeps no recalls)."""

_RUN_KEYS = ["user_id", "agent_id", "workflow_id", "run_id"]
_SHOWN_STATUSES = [status.value for status in ExecutionStatus]
_RUNNING = ("running", "pending", "retrying")


def _normalised(df: pd.DataFrame) -> pd.DataFrame:
    """The step frame with ``status`` as shown (a missing or unknown status reads ``unknown``)."""
    status = df["status"]
    shown = status.where(status.isin(_SHOWN_STATUSES), "unknown")
    if not shown.equals(status):
        df = df.assign(status=shown.astype(object))
    return df


def _run_key(frame: pd.DataFrame) -> pd.Series:
    """A readable id per run: ``workflow/run_id`` (namespace in front only where two would collide)."""
    wf = frame["workflow_id"].fillna("").astype(str)
    run = frame["run_id"]
    key = wf.where(run.isna(), wf + "/" + run.fillna("").astype(str))
    ns = frame["user_id"].fillna("").astype(str) + "/" + frame["agent_id"].fillna("").astype(str)
    clash = key.duplicated(keep=False)
    return key.where(~clash, ns + "/" + key)


def _run_group_ids(steps: pd.DataFrame) -> np.ndarray:
    """A run number per step (0, 1, … in first-seen order) from its (user, agent, workflow, run_id)."""
    codes: np.ndarray | None = None
    for name in _RUN_KEYS:
        column, _ = pd.factorize(steps[name].to_numpy(dtype=object), use_na_sentinel=False)
        codes = column if codes is None else pd.factorize(codes * (int(column.max()) + 1) + column)[0]
    assert codes is not None
    ids: np.ndarray = pd.factorize(codes)[0]
    return ids


def _runs_from_steps(df: pd.DataFrame) -> pd.DataFrame:
    df = _normalised(df)
    if df.empty:
        empty = pd.DataFrame({c: pd.Series(dtype=object) for c in RUN_COLUMNS})
        for c in ("started_at", "ended_at"):
            empty[c] = pd.Series(dtype="datetime64[us, UTC]")
        for c in ("steps", "failed_steps", "retries"):
            empty[c] = pd.Series(dtype="int64")
        empty["duration_s"] = pd.Series(dtype="float64")
        empty["recalls"] = pd.Series(dtype="Int64")
        return empty.set_axis(pd.Index([], name="run", dtype=object))
    gid = _run_group_ids(df)
    firsts = np.unique(gid, return_index=True)[1]  # group g's first step is at firsts[g]
    status = df["status"]
    error = df["error"].where(status.eq("failed"))
    start = df["started_at"].fillna(df["created_at"])
    # Grouping by one int column is many times faster than by four object columns.
    table = pd.DataFrame({
        # tz-aware times stay Series (to_numpy would box every value as a Timestamp object)
        "g": gid, "_start": start.reset_index(drop=True),
        "_end": df["ended_at"].fillna(start).reset_index(drop=True),
        "_failed": status.eq("failed").to_numpy(), "_unknown": status.eq("unknown").to_numpy(),
        "_running": status.isin(_RUNNING).to_numpy(), "_retries": df["retry_count"].fillna(0).to_numpy("int64"),
        "_error": error.to_numpy(dtype=object), "duration_s": df["duration_s"].to_numpy(),
    })
    counted = "recalls" in df.columns  # a traces_frame(..., recalls=True)
    if counted:
        table["_recalls"] = df["recalls"].fillna(0).to_numpy("int64")
    runs = table.groupby("g", sort=True).agg(
        **({"recalls": ("_recalls", "sum")} if counted else {}),
        started_at=("_start", "min"), ended_at=("_end", "max"), steps=("_failed", "size"),
        failed_steps=("_failed", "sum"), retries=("_retries", "sum"), first_error=("_error", "first"),
        any_unknown=("_unknown", "any"), any_running=("_running", "any"), busy=("duration_s", "sum"),
    ).reset_index(drop=True)
    for name in _RUN_KEYS:
        runs[name] = df[name].to_numpy(dtype=object)[firsts]
    used: list[set[str]] = [set() for _ in range(len(runs))]
    for g, tool in set(zip(gid.tolist(), df["tool"].tolist(), strict=True)):
        if isinstance(tool, str):
            used[g].add(tool)
    runs["tools"] = pd.Series([", ".join(sorted(u)) for u in used], index=runs.index, dtype=object)
    wall = (runs["ended_at"] - runs["started_at"]).dt.total_seconds()
    runs["duration_s"] = wall.where(wall.notna(), runs["busy"]).astype("float64")
    runs["status"] = pd.Series(np.select(
        [runs["failed_steps"] > 0, runs["any_running"], runs["any_unknown"]],
        ["failed", "running", "unknown"], default="success",
    ).tolist(), index=runs.index, dtype=object)
    runs["first_error"] = runs["first_error"].astype(object).where(runs["first_error"].notna(), None)
    for name in ("steps", "failed_steps", "retries"):
        runs[name] = runs[name].astype("int64")
    runs["recalls"] = runs["recalls"].astype("Int64") if counted else pd.array([pd.NA] * len(runs), dtype="Int64")
    for name in _RUN_KEYS:
        runs[name] = runs[name].astype(object).where(runs[name].notna(), None)
    runs.index = pd.Index(_run_key(runs), name="run", dtype=object)
    return runs.sort_values("started_at", ascending=False, kind="stable")[list(RUN_COLUMNS)]


def run_positions(steps: pd.DataFrame, runs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row positions in ``steps`` of each run of ``runs`` (a :func:`runs_frame` of those steps), by run id."""
    if steps.empty:
        return {}
    group = _run_group_ids(steps)
    order = np.argsort(group, kind="stable")
    chunks = np.split(order, np.flatnonzero(np.diff(group[order])) + 1)
    firsts = steps.iloc[[int(c[0]) for c in chunks]][_RUN_KEYS]
    keys = _run_key(firsts.astype(object).where(firsts.notna(), None)).tolist()
    found = dict(zip(keys, chunks, strict=True))
    return {run: found.get(run, np.empty(0, dtype=np.intp)) for run in runs.index}


def _as_list(value: str | list[str] | tuple[str, ...] | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]


def filter_runs(
    runs: pd.DataFrame,
    *,
    status: str | list[str] | None = None,
    agent_id: str | list[str] | None = None,
    user_id: str | list[str] | None = None,
    workflow_id: str | None = None,
    tool: str | None = None,
    since: datetime | str | float | None = None,
    until: datetime | str | float | None = None,
    min_duration: float | None = None,
    max_duration: float | None = None,
    text: str | None = None,
) -> pd.DataFrame:
    """The rows of a :func:`runs_frame` that match every filter given (see :func:`runs_frame`)."""
    keep = pd.Series(True, index=runs.index)
    for column, wanted in (("status", _as_list(status)), ("agent_id", _as_list(agent_id)),
                           ("user_id", _as_list(user_id))):
        if wanted is not None:
            keep &= runs[column].isin(wanted)
    if workflow_id is not None:
        keep &= runs["workflow_id"].eq(workflow_id)
    if tool is not None:
        keep &= runs["tools"].map(lambda t: tool in t.split(", "))
    for bound, cmp in ((since, runs["started_at"].ge), (until, runs["started_at"].le)):
        us = _since_us(bound)
        if us is not None:
            keep &= cmp(pd.Timestamp(us, unit="us", tz="UTC"))
    if min_duration is not None:
        keep &= runs["duration_s"].ge(float(min_duration))
    if max_duration is not None:
        keep &= runs["duration_s"].le(float(max_duration))
    if text:
        needle = text.casefold()
        hay = (runs.index.to_series().astype(str) + " " + runs["first_error"].fillna("").astype(str) + " "
               + runs["tools"].astype(str) + " " + runs["agent_id"].fillna("").astype(str) + " "
               + runs["user_id"].fillna("").astype(str))
        keep &= hay.str.casefold().str.contains(needle, regex=False)
    return runs[keep.to_numpy(dtype=bool)]


def runs_frame(
    mem: pd.DataFrame | MemoryProvider | Memory,
    *,
    status: str | list[str] | None = None,
    agent_id: str | list[str] | None = None,
    user_id: str | list[str] | None = None,
    workflow_id: str | None = None,
    tool: str | None = None,
    since: datetime | str | float | None = None,
    until: datetime | str | float | None = None,
    min_duration: float | None = None,
    max_duration: float | None = None,
) -> pd.DataFrame:
    """One row per workflow run, newest first, indexed by a readable ``run`` id.

    A run is the steps sharing ``(user_id, agent_id, workflow_id, run_id)`` (a workflow
    without ``run_id`` is one run). Columns (:data:`RUN_COLUMNS`): ``workflow_id, agent_id,
    user_id, run_id``, ``started_at`` / ``ended_at`` (UTC; first step's start, last step's
    end), ``duration_s`` (wall clock), ``steps``, ``failed_steps``, ``retries``,
    ``first_error``, ``status`` (``failed`` if any step failed, else ``running``,
    ``unknown`` or ``success``), ``tools`` and ``recalls`` (the searches the run's steps
    made, see :func:`recalls_frame`; ``<NA>`` when the store keeps no recalls, or when
    ``mem`` is a frame read without ``recalls=True``).

    Parameters
    ----------
    mem
        A store, or a :func:`traces_frame` already read.
    status, agent_id, user_id
        Keep runs with this value (or any of a list).
    workflow_id, tool
        Keep runs of this workflow / runs that used this tool.
    since, until
        Keep runs started in this window (datetime, ISO string or epoch seconds).
    min_duration, max_duration
        Keep runs whose duration in seconds is in this range.

    Examples
    --------
    >>> runs_frame(mem, status="failed").head()                          # doctest: +SKIP
    >>> runs_frame(mem, min_duration=60).sort_values("duration_s")       # doctest: +SKIP
    """
    if isinstance(mem, pd.DataFrame):
        steps = mem
    else:
        # Namespace filters go to the reader (an index lookup); the rest need whole runs.
        steps = traces_frame(
            mem, workflow_id=workflow_id,
            agent_id=agent_id if isinstance(agent_id, str) else None,
            user_id=user_id if isinstance(user_id, str) else None,
            recalls=_keeps_recalls(mem),
        )
    return filter_runs(
        _runs_from_steps(steps), status=status, agent_id=agent_id, user_id=user_id, workflow_id=workflow_id,
        tool=tool, since=since, until=until, min_duration=min_duration, max_duration=max_duration,
    )


def _pick_run(runs: pd.DataFrame, run: str | pd.Series) -> pd.Series:
    if isinstance(run, pd.Series):
        return run
    if not isinstance(run, str):
        raise InvalidInputError(f"a run is named by its runs_frame id or run_id, got {type(run).__name__}")
    if run in runs.index:
        return runs.loc[run]
    for column in ("run_id", "workflow_id"):
        hits = runs[runs[column].eq(run)]
        if len(hits) == 1:
            return hits.iloc[0]
        if len(hits) > 1:
            raise InvalidInputError(f"{run!r} names {len(hits)} runs; use one of {sorted(hits.index)[:5]}")
    raise InvalidInputError(f"no run {run!r} in this store")


def run_steps(mem: pd.DataFrame | MemoryProvider | Memory, run: str | pd.Series) -> pd.DataFrame:
    """The steps of one run (a :func:`traces_frame` slice, status as shown), in replay order.

    ``run`` is a :func:`runs_frame` id (its index), a row of it, or a ``run_id`` /
    ``workflow_id`` that names exactly one run. Read from a store that keeps recalls, each
    step also has ``recalls`` (searches it made) and ``recalled`` (memories they returned).
    The last column, ``timing``, says where each step's timing came from: ``recorded`` (its
    data gave a duration, in any spelling memkit reads, or a start and an end), ``start only``
    or ``none`` (the trace panel then places it by step order).
    """
    if isinstance(mem, pd.DataFrame):
        steps = mem
        row = run if isinstance(run, pd.Series) else _pick_run(_runs_from_steps(mem), run)
    else:
        if isinstance(run, pd.Series):
            row = run
            steps = traces_frame(mem, workflow_id=row["workflow_id"], agent_id=row["agent_id"],
                                 user_id=row["user_id"])
        else:
            steps = traces_frame(mem)
            row = _pick_run(_runs_from_steps(steps), run)
            steps = steps[steps["workflow_id"].eq(row["workflow_id"]).to_numpy(dtype=bool)]
    keep = np.ones(len(steps), dtype=bool)
    for column in _RUN_KEYS:
        value = row[column]
        keep &= steps[column].isna().to_numpy() if value is None else steps[column].eq(value).to_numpy(dtype=bool)
    chosen = _normalised(steps[keep])
    if not isinstance(mem, pd.DataFrame) and _keeps_recalls(mem) and "recalls" not in chosen.columns:
        chosen = _with_recall_counts(chosen, mem)  # one workflow's recalls: an indexed read
    return chosen.assign(timing=_timing_of(chosen))


def _timing_of(steps: pd.DataFrame) -> pd.Series:
    """Where each step's timing came from: ``recorded`` (its data gave a duration, in any spelling
    memkit reads, or a start and an end), ``start only`` (a start time, no duration) or ``none``
    (no timing at all: the trace panel places it by step order)."""
    labels = np.select([steps["duration_s"].notna().to_numpy(), steps["started_at"].notna().to_numpy()],
                       ["recorded", "start only"], default="none")
    return pd.Series(labels.tolist(), index=steps.index, dtype=object)


_STEP_DIFF_COLUMNS = ("step_name", "tool", "status", "error")


def _nested_of(steps: pd.DataFrame, prefix: str) -> list[dict[str, Any]]:
    cols = [c for c in steps.columns if isinstance(c, str) and c.startswith(prefix)]
    out: list[dict[str, Any]] = [{} for _ in range(len(steps))]
    for col in cols:
        key = col[len(prefix):]
        for i, v in enumerate(steps[col].tolist()):
            if not _missing(v):
                out[i][key] = v
    return out


def _differs(a: Any, b: Any) -> bool:
    if _missing(a) and _missing(b):
        return False
    try:
        return bool(a != b)
    except (TypeError, ValueError):  # arrays and other odd cells
        return repr(a) != repr(b)


def compare_runs(
    mem: pd.DataFrame | MemoryProvider | Memory, run_a: str | pd.Series, run_b: str | pd.Series
) -> pd.DataFrame:
    """Two runs' steps side by side, aligned by ``step_index`` (else by position).

    One row per aligned step: ``step_index``, then for each run ``step_name_a/_b, tool_a/_b,
    status_a/_b, duration_a_s/_b_s, error_a/_b``, ``duration_change_s`` (b minus a), the
    ``params_changed`` / ``result_changed`` keys as ``{key: (a, b)}``, ``changes`` (what
    differs, e.g. ``"status, params.gene"``) and ``change``: ``changed`` (its name, tool,
    status or error differ), ``data differs`` (only parameters or result differ), ``same``,
    ``only in a`` or ``only in b``. Durations alone never count as a difference.
    Runs of different workflows can be compared: ``attrs["same_workflow"]`` is then ``False``
    and ``attrs["workflows"]`` names both.

    Examples
    --------
    >>> diff = compare_runs(mem, "variant-calling-alice-1/run-alice-1",       # doctest: +SKIP
    ...                     "variant-calling-bob-1/run-bob-1")
    >>> diff[diff.change != "same"]                                          # doctest: +SKIP
    """
    source: pd.DataFrame | MemoryProvider | Memory = mem
    if not isinstance(mem, pd.DataFrame) and not (isinstance(run_a, pd.Series) and isinstance(run_b, pd.Series)):
        source = traces_frame(mem)  # one read for both runs
    if isinstance(source, pd.DataFrame) and not (isinstance(run_a, pd.Series) and isinstance(run_b, pd.Series)):
        runs = _runs_from_steps(source)  # once, not once per run
        run_a, run_b = _pick_run(runs, run_a), _pick_run(runs, run_b)
    diff = _compare_steps(run_steps(source, run_a), run_steps(source, run_b))
    workflows = (run_a["workflow_id"], run_b["workflow_id"]) if isinstance(run_a, pd.Series) and isinstance(
        run_b, pd.Series) else (None, None)
    # Runs of two workflows can be compared, but the reader is told: their steps need not correspond.
    diff.attrs["workflows"] = workflows
    diff.attrs["same_workflow"] = workflows[0] == workflows[1]
    return diff


def _compare_steps(steps_a: pd.DataFrame, steps_b: pd.DataFrame) -> pd.DataFrame:
    """:func:`compare_runs` of two step frames already sliced (the panel keeps each run's rows)."""
    sides = [steps_a, steps_b]
    keyed: list[dict[int, int]] = []
    for steps in sides:
        index = steps["step_index"]
        use_index = bool(len(steps)) and not index.isna().any() and index.is_unique
        keys = [int(v) for v in index] if use_index else list(range(len(steps)))
        keyed.append({k: i for i, k in enumerate(keys)})
    params = [_nested_of(s, "params.") for s in sides]
    results = [_nested_of(s, "result.") for s in sides]
    # Plain lists: reading rows one by one through pandas is slow for a 1,000-step run.
    cells = [{c: s[c].tolist() for c in (*_STEP_DIFF_COLUMNS, "duration_s")} for s in sides]
    rows: list[dict[str, Any]] = []
    for key in sorted(set(keyed[0]) | set(keyed[1])):
        row: dict[str, Any] = {"step_index": key}
        pos = [k.get(key) for k in keyed]
        for side, p, side_cells in zip("ab", pos, cells, strict=True):
            for col in _STEP_DIFF_COLUMNS:
                value = None if p is None else side_cells[col][p]
                row[f"{col}_{side}"] = None if _missing(value) else value
            dur = None if p is None else side_cells["duration_s"][p]
            row[f"duration_{side}_s"] = float("nan") if dur is None or _missing(dur) else float(dur)
        row["duration_change_s"] = row["duration_b_s"] - row["duration_a_s"]
        changes: list[str] = []
        row["params_changed"], row["result_changed"] = {}, {}
        if pos[0] is None or pos[1] is None:
            row["change"] = "only in a" if pos[1] is None else "only in b"
        else:
            changes = [c for c in _STEP_DIFF_COLUMNS if _differs(row[f"{c}_a"], row[f"{c}_b"])]
            for name, nested in (("params", params), ("result", results)):
                a, b = nested[0][pos[0]], nested[1][pos[1]]
                diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if _differs(a.get(k), b.get(k))}
                row[f"{name}_changed"] = diff
                changes += [f"{name}.{k}" for k in diff]
            outcome = any(c in _STEP_DIFF_COLUMNS for c in changes)
            row["change"] = "changed" if outcome else "data differs" if changes else "same"
        row["changes"] = ", ".join(changes)
        rows.append(row)
    columns = ["step_index"] + [f"{c}_{s}" for c in ("step_name", "tool", "status") for s in "ab"] + [
        "duration_a_s", "duration_b_s", "duration_change_s", "error_a", "error_b",
        "params_changed", "result_changed", "changes", "change",
    ]
    # Built column by column so text cells stay ``str | None`` (pandas would infer its string dtype).
    data: dict[str, Any] = {}
    for col in columns:
        values = [r[col] for r in rows]
        if col == "step_index":
            data[col] = pd.Series(values, dtype="int64")
        elif col.startswith("duration"):
            data[col] = pd.Series(values, dtype="float64")
        else:
            data[col] = pd.Series(values, dtype=object)
    return pd.DataFrame(data, columns=columns)


# -- recalls: what each step retrieved ---------------------------------------------------

RECALL_COLUMNS = (
    "recall_id", "created_at", "user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name",
    "attempt", "kind", "query", "mode", "limit", "as_of", "rank", "memory_id", "score", "legs",
    "keyword_rank", "keyword_score", "semantic_rank", "semantic_score", "content", "details",
)
"""Columns of :func:`recalls_frame`, in order."""

_LEGS = ("keyword", "semantic")


def _keeps_recalls(mem: MemoryProvider | Memory) -> bool:
    """Whether the store records recalls (implements :class:`memkit.SupportsRecalls`)."""
    return isinstance(_provider(mem), SupportsRecalls)


def _recalls_of(
    provider: MemoryProvider, *, user_id: str | None = None, agent_id: str | None = None,
    workflow_id: str | None = None, run_id: str | None = None,
) -> list[Recall]:
    if not isinstance(provider, SupportsRecalls):
        raise NotImplementedError(f"{provider!r} does not keep recalls")
    return run_sync(provider.recalls(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id))


def _leg(details: dict[str, Any] | None, leg: str, field: str) -> Any:
    part = (details or {}).get(leg)
    value = part.get(field) if isinstance(part, dict) else None
    return np.nan if value is None else value


def recalls_frame(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    *,
    run_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> pd.DataFrame:
    """One row per (recall, memory it returned): which step recalled what, at what rank and score.

    Columns are :data:`RECALL_COLUMNS`: the recall (``recall_id``, ``created_at``, the
    namespace searched, the step: ``workflow_id, run_id, step_index, step_name,
    attempt``; ``kind`` is ``search`` or ``context``; ``query, mode, limit, as_of``), then
    the memory (``rank`` 1 = best, ``memory_id``, ``score``, ``legs``: the retrieval legs
    that found it, per-leg ranks and scores, ``content`` as it was returned, and the full
    ``details``). A recall that returned nothing is one row with an empty memory. Rows are
    in recording order, then rank. ``user_id``/``agent_id`` keep one namespace's recalls.

    Examples
    --------
    >>> df = recalls_frame(mem, workflow_id="wf1")                       # doctest: +SKIP
    >>> df.groupby("step_name").memory_id.nunique()                       # doctest: +SKIP
    """
    provider = _provider(mem)
    rows: list[dict[str, Any]] = []
    for recall in _recalls_of(provider, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id):
        head = {
            "recall_id": recall.id, "created_at": recall.created_at, "user_id": recall.user_id,
            "agent_id": recall.agent_id, "workflow_id": recall.workflow_id, "run_id": recall.run_id,
            "step_index": recall.step_index, "step_name": recall.step_name, "attempt": recall.attempt,
            "kind": recall.kind, "query": recall.query, "mode": recall.mode, "limit": recall.limit,
            "as_of": recall.as_of,
        }
        hits: list[RecalledMemory | None] = list(recall.hits) or [None]
        for hit in hits:
            row = dict(head)
            if hit is None:
                row.update(rank=None, memory_id=None, score=np.nan, legs="", content=None, details=None)
            else:
                found = [leg for leg in _LEGS if not pd.isna(_leg(hit.details, leg, "rank"))]
                row.update(
                    rank=hit.rank, memory_id=hit.id, score=np.nan if hit.score is None else hit.score,
                    legs=", ".join(found), content=hit.content, details=hit.details,
                )
            for leg in _LEGS:
                row[f"{leg}_rank"] = np.nan if hit is None else _leg(hit.details, leg, "rank")
                row[f"{leg}_score"] = np.nan if hit is None else _leg(hit.details, leg, "score")
            rows.append(row)
    frame = pd.DataFrame(rows, columns=list(RECALL_COLUMNS))
    for column in ("created_at", "as_of"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    for column in ("step_index", "attempt", "rank", "limit", "keyword_rank", "semantic_rank"):
        frame[column] = pd.array(frame[column].astype("Float64"), dtype="Int64")
    for column in ("score", "keyword_score", "semantic_score"):
        frame[column] = frame[column].astype("float64")
    return frame


def recall_counts(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> pd.DataFrame:
    """Recalls per step: ``user_id, agent_id, workflow_id, run_id, step_index, recalls, recalled``.

    ``user_id``/``agent_id`` are the namespace of the step's trace (a run is one namespace's:
    two users may run the same ``workflow_id``), whichever namespace its searches read;
    ``recalled`` counts the memories they returned. Give ``user_id``/``agent_id`` to count one
    namespace's steps only. Join it to :func:`traces_frame` on ``user_id, agent_id,
    workflow_id, run_id, step_index`` (as ``traces_frame(..., recalls=True)`` does).
    """
    provider = _provider(mem)
    if isinstance(provider, SupportsRecallCounts):  # a store that counts in place (SQLite: one GROUP BY)
        rows = run_sync(provider.recall_step_counts(workflow_id, user_id=user_id, agent_id=agent_id))
        return pd.DataFrame({
            "user_id": pd.Series([r[0] for r in rows], dtype=object),
            "agent_id": pd.Series([r[1] for r in rows], dtype=object),
            "workflow_id": pd.Series([r[2] for r in rows], dtype=object),
            "run_id": pd.Series([r[3] for r in rows], dtype=object),
            "step_index": pd.Series([r[4] for r in rows], dtype="int64"),
            "recalls": pd.Series([r[5] for r in rows], dtype="int64"),
            "recalled": pd.Series([r[6] or 0 for r in rows], dtype="int64"),
        })
    recalls = [r for r in _recalls_of(provider, workflow_id=workflow_id) if r.step_index is not None]
    spaces = [_recall.step_namespace(r) for r in recalls]
    if user_id is not None or agent_id is not None:
        keep = [(user_id is None or u == user_id) and (agent_id is None or a == agent_id) for u, a in spaces]
        recalls = [r for r, k in zip(recalls, keep, strict=True) if k]
        spaces = [s for s, k in zip(spaces, keep, strict=True) if k]
    keys = ["user_id", "agent_id", "workflow_id", "run_id", "step_index"]
    frame = pd.DataFrame(
        {
            "user_id": [u for u, _ in spaces],
            "agent_id": [a for _, a in spaces],
            "workflow_id": [r.workflow_id for r in recalls],
            "run_id": [r.run_id for r in recalls],
            "step_index": [r.step_index for r in recalls],
            "recalled": [len(r.hits) for r in recalls],
        },
        columns=[*keys, "recalled"],
    )
    counts = (
        frame.groupby(keys, dropna=False, sort=False)
        .agg(recalls=("recalled", "size"), recalled=("recalled", "sum"))
        .reset_index()
    )
    counts["step_index"] = counts["step_index"].astype("int64")
    counts["recalls"] = counts["recalls"].astype("int64")
    counts["recalled"] = counts["recalled"].astype("int64")
    return counts


def _with_recall_counts(steps: pd.DataFrame, mem: MemoryProvider | Memory) -> pd.DataFrame:
    """``steps`` (a :func:`traces_frame`) with ``recalls`` and ``recalled`` per step (0 when none)."""
    if steps.empty:
        return steps.assign(recalls=pd.Series(dtype="int64"), recalled=pd.Series(dtype="int64"))
    workflows = steps["workflow_id"].dropna().unique()
    workflow = str(workflows[0]) if len(workflows) == 1 else None
    counts = recall_counts(mem, workflow)
    out = steps.copy(deep=False)  # the new columns only: copying every trace column costs more than the count
    if counts.empty:  # the common case of a store that records nothing: no join to make
        out["recalls"] = out["recalled"] = np.zeros(len(steps), dtype="int64")
        return out

    # The join as integer codes (a missing value is one more code): a Python loop over the steps
    # cost most of the panel's read on a store with thousands of runs. The step's namespace is
    # part of the key: another namespace's run of the same workflow (same workflow_id, no run_id,
    # same step indexes) must not lend this one its recalls.
    n = len(steps)
    key = np.zeros(n + len(counts), dtype=np.int64)
    for left, right in (
        (steps["user_id"].to_numpy(dtype=object), counts["user_id"].to_numpy(dtype=object)),
        (steps["agent_id"].to_numpy(dtype=object), counts["agent_id"].to_numpy(dtype=object)),
        (steps["workflow_id"].to_numpy(dtype=object), counts["workflow_id"].to_numpy(dtype=object)),
        (steps["run_id"].to_numpy(dtype=object), counts["run_id"].to_numpy(dtype=object)),
        (steps["step_index"].to_numpy(dtype="float64", na_value=np.nan), counts["step_index"].to_numpy("float64")),
    ):
        codes = pd.factorize(np.concatenate([left, right]), use_na_sentinel=False)[0].astype(np.int64)
        key = pd.factorize(key * (int(codes.max()) + 1) + codes)[0].astype(np.int64)
    where = pd.Index(key[n:]).get_indexer(key[:n])
    found = where >= 0
    for name in ("recalls", "recalled"):
        column = np.zeros(n, dtype="int64")
        column[found] = counts[name].to_numpy("int64")[where[found]]
        out[name] = column
    return out


REPLAY_COLUMNS = ("memory_id", "change", "old_rank", "new_rank", "old_score", "new_score", "deleted", "content")
"""Columns of :func:`replay_recall`, in order."""


async def _rerun(provider: MemoryProvider, recall: Recall) -> list[tuple[int, MemoryItem]]:
    if recall.kind == "context":
        from memkit._context import build_context

        options = recall.options or {}
        window = await build_context(
            provider, recall.query, recall.user_id, recall.agent_id,
            int(options.get("token_budget", 1_000)), candidates=recall.limit, filters=recall.filters,
            mode=recall.mode, order=options.get("order", "relevance"),
            dedup_threshold=float(options.get("dedup_threshold", 0.9)),
        )
        with _recall.paused():
            ranked = await provider.search(
                recall.query, recall.user_id, recall.agent_id, limit=recall.limit, filters=recall.filters,
                mode=recall.mode,
            )
        rank = {item.id: position for position, item in enumerate(ranked, start=1)}
        return [(rank.get(item.id, 0), item) for item in window.items]
    hits = await provider.search(
        recall.query, recall.user_id, recall.agent_id, limit=recall.limit, filters=recall.filters,
        mode=recall.mode,
    )
    return list(enumerate(hits, start=1))


async def _replay(provider: MemoryProvider, recall_id: str) -> tuple[Recall, list[tuple[int, MemoryItem]], set[str]]:
    if not isinstance(provider, SupportsRecalls):
        raise NotImplementedError(f"{provider!r} does not keep recalls")
    recall = await provider.get_recall(recall_id)
    if recall is None:
        raise NotFoundError(f"no recall with id {recall_id!r}")
    with _recall.paused():
        now = await _rerun(provider, recall)
    returned = {item.id for _, item in now}
    deleted: set[str] = set()
    if isinstance(provider, SupportsGet):
        for hit in recall.hits:
            if hit.id not in returned and await provider.get(hit.id) is None:
                deleted.add(hit.id)
    return recall, now, deleted


def replay_recall(mem: MemoryProvider | Memory, recall_id: str) -> pd.DataFrame:
    """Run a recorded recall again now and say what changed: would the step get the same memories?

    The same query, namespace, mode, filters and limit (for a context recall, the same
    budget and candidates through :func:`memkit.build_context`) against the store as it
    is today, with today's embedder and fusion settings. One row per memory in either
    answer (columns :data:`REPLAY_COLUMNS`), today's order first, then the ones gone:

    * ``change``: ``same`` (same rank), ``up``/``down`` (ranked better/worse now),
      ``new`` (returned now, not then), ``gone`` (returned then, not now);
    * ``deleted``: a gone memory no longer exists in the store (``content`` is then its
      snapshot from the recall; otherwise today's text).

    The replay itself is not recorded.
    """
    provider = _provider(mem)
    with _recall.paused():
        recall, now, deleted = run_sync(_replay(provider, recall_id))
    old = {hit.id: hit for hit in recall.hits}
    rows: list[dict[str, Any]] = []
    for new_rank, item in now:
        before = old.get(item.id)
        if before is None:
            change = "new"
        elif new_rank == before.rank:
            change = "same"
        else:
            change = "up" if new_rank < before.rank else "down"
        rows.append({
            "memory_id": item.id, "change": change, "old_rank": None if before is None else before.rank,
            "new_rank": new_rank, "old_score": None if before is None else before.score, "new_score": item.score,
            "deleted": False, "content": item.content,
        })
    returned = {item.id for _, item in now}
    for hit in recall.hits:
        if hit.id not in returned:
            rows.append({
                "memory_id": hit.id, "change": "gone", "old_rank": hit.rank, "new_rank": None,
                "old_score": hit.score, "new_score": None, "deleted": hit.id in deleted, "content": hit.content,
            })
    frame = pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))
    for column in ("old_rank", "new_rank"):
        frame[column] = pd.array(frame[column].astype("Float64"), dtype="Int64")
    for column in ("old_score", "new_score"):
        frame[column] = frame[column].astype("float64")
    frame["deleted"] = frame["deleted"].astype(bool)
    frame.attrs["recall"] = recall
    return frame


# -- marks: what a researcher judged ---------------------------------------------------------

ANNOTATION_COLUMNS = (
    "mark_id", "created_at", "user_id", "agent_id", "kind", "label", "note", "workflow_id", "run_id",
    "step_index", "step_name", "step_id", "recall_id", "query", "memory_id",
)
"""Columns of :func:`annotations_frame`, in order."""


def annotations_frame(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    *,
    run_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> pd.DataFrame:
    """One row per mark a researcher made (:meth:`memkit.Memory.mark_memory`, :meth:`~memkit.Memory.mark_step`).

    Columns are :data:`ANNOTATION_COLUMNS`: the mark (``mark_id``, ``created_at``, its
    namespace), ``kind`` (``memory`` or ``step``), ``label`` (``relevant`` / ``not_relevant``
    for a recalled memory, ``good`` / ``bad`` for a step) and the researcher's ``note``; where
    the step is (``workflow_id, run_id, step_index, step_name``; ``step_id`` for a step mark);
    for a memory mark the ``recall_id``, its ``query`` and the ``memory_id`` judged. Oldest
    first. ``user_id``/``agent_id`` keep one namespace's marks.

    Examples
    --------
    >>> df = annotations_frame(mem, "wf1", user_id="u1", agent_id="bio")     # doctest: +SKIP
    >>> df[df.label == "not_relevant"][["query", "memory_id", "note"]]      # doctest: +SKIP
    """
    provider = _provider(mem)
    if not isinstance(provider, SupportsMarks):
        raise NotImplementedError(f"{provider!r} does not keep marks")
    marks = run_sync(provider.marks(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id))
    frame = pd.DataFrame(
        [{"mark_id": m.id, "created_at": m.created_at, "user_id": m.user_id, "agent_id": m.agent_id,
          "kind": m.kind, "label": m.label, "note": m.note, "workflow_id": m.workflow_id, "run_id": m.run_id,
          "step_index": m.step_index, "step_name": m.step_name, "step_id": m.step_id, "recall_id": m.recall_id,
          "query": m.query, "memory_id": m.memory_id} for m in marks],
        columns=list(ANNOTATION_COLUMNS),
    )
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    frame["step_index"] = pd.array(frame["step_index"].astype("Float64"), dtype="Int64")
    return frame
