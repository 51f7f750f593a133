"""Reading a store into frames: trace steps (one row each, fast path or export), memories, namespaces,
and the per-tool and per-failure audits over them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd

from memkit._core._items import READ_KEYS, agent_keys, status_of
from memkit._core._models import NamespaceInfo
from memkit._core._port import (
    MemoryProvider,
    SupportsExport,
    SupportsNamespaces,
    SupportsPaging,
    SupportsTraceColumns,
    SupportsTracePayloads,
)
from memkit._core._records import to_us
from memkit._core._timing import step_timing
from memkit._sync import Memory, call, provider_of
from memkit.frames._recalls import _with_recall_counts
from memkit.frames._usage import STEP_USAGE_COLUMNS, USAGE_WORDS, PricesLike, found_of, with_usage
from memkit.traces import ExecutionStatus, categorize_error

_provider = provider_of


TRACE_COLUMNS = (
    "workflow_id", "agent_id", "user_id", "run_id", "step_index", "step_name", "tool", "status",
    "started_at", "ended_at", "duration_s", "retry_count", "error", "created_at",
    *STEP_USAGE_COLUMNS,
)
# parent_step_index is run_steps' own column
_SHOWN_KEYS = READ_KEYS | {"parent_step_index"}
_USAGE_SUMS = ("tokens_in", "tokens_out", "tokens_total", "cost")
_TEXT = ("id", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status", "error")
_NUMBERS = ("seq", "created_us", "step_index", "started_us", "duration_us", "retry_count")


def _since_us(since: datetime | str | float | None) -> int | None:
    if since is None:
        return None
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        return int(since * 1_000_000)
    stamp = pd.Timestamp(since)
    return to_us(stamp.to_pydatetime())


# -- traces --------------------------------------------------------------------------


_NA = np.iinfo(np.int64).min  # a missing number in trace columns; numpy reads it as NaT


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


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


def _shown_statuses(words: Any, index: pd.Index) -> pd.Series:
    """The status each step's word means (:func:`memkit._core._items.status_of`), read once per word."""
    codes, uniques = pd.factorize(np.asarray(words, dtype=object), use_na_sentinel=False)
    shown = np.array([status_of(w) for w in uniques] or ["unknown"], dtype=object)
    return pd.Series(shown[codes] if len(codes) else [], index=index, dtype=object)


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
        "status": _shown_statuses(take(cols["status"]), index),
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
    prices: PricesLike = None,
    data: bool = False,
    usage: bool = True,
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
    prices
        ``cost`` of a step that recorded tokens and no cost: ``memkit.Prices({"gpt-4o": (2.5, 10.0)})``
        or a plain dict, model -> price per million input and output tokens.

    usage
        Read the usage columns (``model, tokens_in, tokens_out, tokens_total, cost, usage_counted,
        session_id, tags``) from each step's data, in any common spelling (:mod:`memkit._core._usage`;
        docs/traces.md). That reads every step's record once more (about 0.05-0.15 ms a step on a
        2-core machine); ``False`` leaves them empty, for a quick read of a very large store.
    data
        Add a ``data.<key>`` column for every other key the agents wrote in their steps
        (``model``, ``tokens``, ``prompt``, ``cost``, a ``traceback``...), read from each step's
        record: one more pass over the store, so only on request.

    Examples
    --------
    >>> df = traces_frame(mem, workflow_id="wf1")              # doctest: +SKIP
    >>> df.groupby("tool").duration_s.describe()               # doctest: +SKIP
    """
    provider = provider_of(mem)
    state = None if status is None else ExecutionStatus(status).value
    # Statuses are compared as shown: the store holds the agent's words (``error``, ``OK``, ``503``...).
    frame = _trace_frame(call(provider, _trace_columns, workflow_id, agent_id, user_id, None, _since_us(since)))
    # Usage and the agents' other keys are in each step's data: one more pass over the records, for both.
    wanted = {str(i) for i in frame.index}
    if data or not usage:
        payloads = call(provider, _payloads, user_id, agent_id, wanted) if data else {}
    else:
        payloads = call(provider, _usage_payloads, user_id, agent_id, wanted)
    frame = with_usage(frame, found_of(payloads) if usage else {}, prices)
    if state is not None:
        frame = frame[frame["status"].eq(state).to_numpy(dtype=bool)]
    if data:
        frame = with_agent_keys(frame, payloads)
    return _with_recall_counts(frame, provider) if recalls else frame


async def _usage_payloads(provider: MemoryProvider, user_id: str | None, agent_id: str | None,
                          wanted: set[str]) -> dict[str, Any]:
    """The payloads the usage columns need: of the steps whose data may hold usage, a session, tags or a
    parent (a store that reads only those), else every wanted step's."""
    if isinstance(provider, SupportsTracePayloads):
        found = await provider.trace_payloads(user_id=user_id, agent_id=agent_id, containing=USAGE_WORDS)
        return {i: p for i, p in found.items() if i in wanted}
    return await _payloads(provider, user_id, agent_id, wanted) if isinstance(provider, SupportsExport) else {}


async def _payloads(provider: MemoryProvider, user_id: str | None, agent_id: str | None,
                    wanted: set[str]) -> dict[str, Any]:
    """Each wanted step's payload (``metadata["trace"]``), by step id, from one pass over the records."""
    if not isinstance(provider, SupportsExport):
        raise NotImplementedError(f"{provider!r} cannot list its records (no export()), which data=True needs")
    found: dict[str, Any] = {}
    async for item in provider.export(user_id, agent_id):
        if item.id in wanted and item.metadata.get("type") == "trace":
            found[item.id] = item.metadata.get("trace")
    return found


def with_agent_keys(steps: pd.DataFrame, payloads: dict[str, Any]) -> pd.DataFrame:
    """``steps`` with a ``data.<key>`` column per key an agent wrote that no other column shows
    (:func:`memkit._core._items.agent_keys`), cells as written, ``None`` where a step has none."""
    cells: dict[str, dict[int, Any]] = {}
    for position, step_id in enumerate(steps.index):
        payload = payloads.get(str(step_id))
        if isinstance(payload, dict):
            for key, value in agent_keys(payload, _SHOWN_KEYS).items():
                cells.setdefault(f"data.{key}", {})[position] = value
    if not cells:
        return steps
    extra = {name: pd.Series([column.get(i) for i in range(len(steps))], index=steps.index, dtype=object)
             for name, column in sorted(cells.items())}
    return pd.concat([steps, pd.DataFrame(extra, index=steps.index)], axis=1)


async def _trace_columns(
    provider: MemoryProvider, workflow_id: str | None, agent_id: str | None, user_id: str | None,
    status: str | None, since_us: int | None,
) -> dict[str, Any]:
    if isinstance(provider, SupportsTraceColumns):
        return await provider.trace_columns(
            workflow_id=workflow_id, agent_id=agent_id, user_id=user_id, status=status, since_us=since_us
        )
    return await _export_trace_columns(provider, workflow_id, agent_id, user_id, status, since_us)


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
    items = call(mem, _collect, user_id, agent_id, filters)
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
    rows = call(mem, _namespaces)
    return pd.DataFrame(
        {
            "user_id": [r.user_id for r in rows],
            "agent_id": [r.agent_id for r in rows],
            "count": pd.array([r.count for r in rows], dtype="int64"),
            "first_at": pd.to_datetime([r.first_at for r in rows], utc=True),
            "last_at": pd.to_datetime([r.last_at for r in rows], utc=True),
        }
    )


async def _namespaces(provider: MemoryProvider) -> list[NamespaceInfo]:
    if not isinstance(provider, SupportsNamespaces):
        raise NotImplementedError(f"{provider!r} cannot list its namespaces")
    return await provider.namespaces()


# -- audits ------------------------------------------------------------------------------


class StepFilters(TypedDict, total=False):
    """The keywords of :func:`traces_frame` besides ``workflow_id``, as the audits pass them on."""

    agent_id: str | None
    user_id: str | None
    status: str | ExecutionStatus | None
    since: datetime | str | float | None
    recalls: bool
    prices: PricesLike
    usage: bool


class TraceFilters(StepFilters, total=False):
    """Every keyword of :func:`traces_frame`."""

    workflow_id: str | None


def _frame(source: pd.DataFrame | MemoryProvider | Memory, **filters: Unpack[TraceFilters]) -> pd.DataFrame:
    return source if isinstance(source, pd.DataFrame) else traces_frame(source, **filters)


def tool_stats(source: pd.DataFrame | MemoryProvider | Memory, **filters: Unpack[TraceFilters]) -> pd.DataFrame:
    """Per tool: ``steps, successes, failures, success_rate, retries``, duration
    ``duration_mean_s, duration_p50_s, duration_p90_s, duration_p95_s, duration_p99_s`` and LLM usage
    ``tokens_in, tokens_out, tokens_total, cost`` (of its steps whose usage counts in their runs'
    totals, see :func:`memkit.frames.runs_frame`; ``prices=`` goes to :func:`traces_frame`).

    ``source`` is a :func:`traces_frame` or a store (``filters`` go to :func:`traces_frame`).
    """
    df = _frame(source, **filters)
    columns = [
        "steps", "successes", "failures", "success_rate", "retries",
        "duration_mean_s", "duration_p50_s", "duration_p90_s", "duration_p95_s", "duration_p99_s",
        *_USAGE_SUMS,
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
            "duration_p95_s": duration.quantile(0.95),
            "duration_p99_s": duration.quantile(0.99),
        }
    )
    if "usage_counted" in df.columns:  # a frame read before usage was a column has none
        counted = df["usage_counted"].to_numpy(dtype=bool)
        for name in _USAGE_SUMS:
            out[name] = df[name].where(counted).groupby(df["tool"], sort=True, dropna=False).sum(min_count=1)
    else:
        for name in _USAGE_SUMS:
            out[name] = pd.NA
    out["success_rate"] = out["successes"] / out["steps"]
    return out[columns]


def failure_patterns(
    source: pd.DataFrame | MemoryProvider | Memory, **filters: Unpack[TraceFilters]
) -> pd.DataFrame:
    """Failed steps per category (the seed framework's: network_error, validation_error,
    parameter_error, criteria_failure, execution_error, unknown; and rate_limit_error, see
    :func:`memkit.traces.categorize_error`) and tool: ``category, tool, count``,
    most frequent first.
    """
    filters.setdefault("usage", False)  # errors only: no usage read
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
