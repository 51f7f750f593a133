"""Auditing an agent as Phoenix and Langfuse users do: latency percentiles per tool, model, run or
workflow, and the steps whose inputs, outputs or errors contain some words (the store's keyword search
over trace records, one namespace at a time)."""

from __future__ import annotations

import re
from typing import Any, Unpack

import pandas as pd

from memkit._core._errors import InvalidInputError
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsNamespaces
from memkit._core._runs import run_key
from memkit._sync import Memory, call, provider_of
from memkit.frames._reading import TraceFilters, _frame
from memkit.frames._runs import _run_keys

__all__ = ["FOUND_COLUMNS", "LATENCY_COLUMNS", "find_steps", "latency_stats"]

LATENCY_COLUMNS = ("steps", "timed", "latency_mean_s", "latency_p50_s", "latency_p95_s", "latency_p99_s",
                   "latency_max_s")
"""Columns of :func:`latency_stats` (``timed``: the steps that recorded a duration, which the figures
are of)."""
_BY = ("tool", "model", "run", "workflow_id", "agent_id", "user_id", "session_id")


def latency_stats(
    source: pd.DataFrame | MemoryProvider | Memory, by: str = "tool", **filters: Unpack[TraceFilters]
) -> pd.DataFrame:
    """Step latency per ``by`` (``tool``, ``model``, ``run``, ``workflow_id``, ``agent_id``, ``user_id`` or
    ``session_id``): :data:`LATENCY_COLUMNS`, slowest p95 first. Each row written is one sample (an
    attempt written on its own row is one); a step without a duration is counted in ``steps`` only.

    ``source`` is a :func:`memkit.frames.traces_frame` or a store (``filters`` go to it).
    """
    if by not in _BY:
        raise InvalidInputError(f"latency_stats(by=...): one of {', '.join(_BY)}, got {by!r}")
    df = _frame(source, **filters)
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in LATENCY_COLUMNS},
                            index=pd.Index([], name=by, dtype=object))
    if by == "run":
        keys = pd.Series(_run_keys(df), index=df.index, dtype=object)
    else:
        keys = df[by].astype(object).where(df[by].notna(), "(none)")
    grouped = df["duration_s"].astype("float64").groupby(keys.to_numpy(), sort=True)
    out = pd.DataFrame({
        "steps": grouped.size().astype("int64"),
        "timed": grouped.count().astype("int64"),
        "latency_mean_s": grouped.mean(),
        "latency_p50_s": grouped.quantile(0.5),
        "latency_p95_s": grouped.quantile(0.95),
        "latency_p99_s": grouped.quantile(0.99),
        "latency_max_s": grouped.max(),
    })
    out.index.name = by
    return out.sort_values("latency_p95_s", ascending=False, kind="stable", na_position="last")[list(LATENCY_COLUMNS)]


FOUND_COLUMNS = ("run", "rank", "score", "user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name",
                 "tool", "status", "error", "match")
"""Columns of :func:`find_steps` (``match``: the words found, with some text either side)."""
_SNIPPET = 60


def _snippet(content: str, words: list[str]) -> str:
    """The stored text around the first of ``words`` it holds (the whole text when short)."""
    lowered = content.casefold()
    at = min((i for w in words if (i := lowered.find(w)) >= 0), default=-1)
    if at < 0:
        return content[: 2 * _SNIPPET]
    start, end = max(at - _SNIPPET, 0), min(at + _SNIPPET, len(content))
    return ("…" if start else "") + content[start:end] + ("…" if end < len(content) else "")


async def _namespaces(provider: MemoryProvider, user_id: str | None, agent_id: str | None) -> list[tuple[str, str]]:
    if user_id is not None and agent_id is not None:
        return [(user_id, agent_id)]
    if not isinstance(provider, SupportsNamespaces):
        raise InvalidInputError("this store cannot list its namespaces: give user_id and agent_id")
    return sorted({(ns.user_id, ns.agent_id) for ns in await provider.namespaces()
                   if user_id in (None, ns.user_id) and agent_id in (None, ns.agent_id)})


async def _search(
    provider: MemoryProvider, query: str, spaces: list[tuple[str, str]], limit: int, filters: dict[str, Any]
) -> list[MemoryItem]:
    found: list[MemoryItem] = []
    search: Any = provider.search  # the port's search need not take mode=
    for user, agent in spaces:
        found += await search(query, user, agent, limit, filters, mode="keyword")
    return found


def find_steps(
    mem: MemoryProvider | Memory,
    query: str,
    *,
    tool: str | None = None,
    workflow_id: str | None = None,
    status: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    limit: int = 50,
) -> pd.DataFrame:
    """The trace steps whose inputs, outputs or errors contain the words of ``query``, best first, with
    their runs: ``find_steps(mem, "404", tool="fetch")`` answers "which runs got a 404 from fetch?".

    It is the store's keyword search (BM25) over its trace records, asked in each namespace on its
    own as every other read is: of ``user_id`` / ``agent_id`` where given, else of every namespace
    the store lists. ``tool``, ``workflow_id`` and ``status`` (the word the agent wrote) narrow it.
    Columns: :data:`FOUND_COLUMNS`, indexed by ``step_id``; ``rank`` is 1 for the best match.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("find_steps: the words to find, a non-empty string")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInputError(f"find_steps: limit is a positive integer, got {limit!r}")
    filters: dict[str, Any] = {"type": "trace"}
    for key, value in (("trace.tool", tool), ("workflow_id", workflow_id), ("trace.status", status)):
        if value is not None:
            if not isinstance(value, str):
                raise InvalidInputError(f"find_steps: {key.removeprefix('trace.')} is a string, got {value!r}")
            filters[key] = value
    provider = provider_of(mem)
    spaces = call(provider, _namespaces, user_id, agent_id)
    items = call(provider, _search, query, spaces, limit, filters)
    items.sort(key=lambda m: -(m.score or 0.0))  # stable: a namespace's own order breaks ties
    items = items[:limit]
    words = [w.casefold() for w in re.findall(r"\w+", query)]
    rows = []
    for rank, item in enumerate(items, start=1):
        meta = item.metadata
        raw = meta.get("trace")
        trace: dict[str, Any] = raw if isinstance(raw, dict) else {}
        workflow = meta.get("workflow_id") if isinstance(meta.get("workflow_id"), str) else None
        run_id = meta.get("run_id") if isinstance(meta.get("run_id"), str) else None
        index = trace.get("step_index")
        rows.append({
            "step_id": item.id, "run": run_key(item.user_id, item.agent_id, workflow, run_id), "rank": rank,
            "score": item.score, "user_id": item.user_id, "agent_id": item.agent_id, "workflow_id": workflow,
            "run_id": run_id, "step_index": index if isinstance(index, int) and not isinstance(index, bool) else None,
            "step_name": trace.get("step_name"), "tool": trace.get("tool"), "status": trace.get("status"),
            "error": trace.get("error"), "match": _snippet(item.content, words),
        })
    frame = pd.DataFrame(rows, columns=["step_id", *FOUND_COLUMNS]).set_index("step_id")
    frame["step_index"] = frame["step_index"].astype("Int64")
    frame["rank"] = frame["rank"].astype("int64")
    frame["score"] = frame["score"].astype("float64")
    return frame
