"""LLM usage in frames: each step's model, tokens and cost (read by :func:`memkit._core._usage.usage_of`),
which steps a run's totals count, and the totals per run, per model and over time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from memkit._core._errors import InvalidInputError
from memkit._core._usage import (
    Labels,
    Placed,
    Prices,
    Usage,
    as_prices,
    counted_steps,
    labels_of,
    place_of,
    usage_of,
)

__all__ = [
    "RUN_USAGE_COLUMNS",
    "STEP_USAGE_COLUMNS",
    "USAGE_WORDS",
    "PricesLike",
    "UsageFilters",
    "found_of",
    "step_usage_columns",
    "usage_by_model",
    "usage_filter",
    "with_usage",
]

PricesLike = Prices | Mapping[str, tuple[float, float]] | None

STEP_USAGE_COLUMNS = ("model", "tokens_in", "tokens_out", "tokens_total", "cost", "usage_counted", "session_id",
                      "tags")
"""Usage columns of :func:`memkit.frames.traces_frame` (``usage_counted``: whether the step's usage counts
in its run's totals: it carries usage and no step beneath it does), then its session and tags
(comma-separated), read by :func:`memkit._core._usage.labels_of`."""
RUN_USAGE_COLUMNS = ("models", "tokens_in", "tokens_out", "tokens_total", "cost", "sessions", "tags")
"""Usage columns of :func:`memkit.frames.runs_frame`: the run's models (sorted, comma-separated), the
sums over the steps whose usage counts (``<NA>``/NaN: no step recorded it), its sessions and tags
(:class:`memkit._core._runs.RunSummary`'s usage, summed there)."""
_TOKENS = ("tokens_in", "tokens_out", "tokens_total")


Found = tuple[Usage, Placed, Labels]

#: Text every step data that :func:`found_of` reads something from holds (its keys' spellings, in
#: :mod:`memkit._core._usage`): a store may read only the steps whose data holds one of them. A parent
#: (``parent_step_index``, ``parent_span_id``) is read too: the roll-up walks up through it.
USAGE_WORDS = ("token", "cost", "model", "session", "conversation", "thread_id", "tags", "parent_")


def found_of(payloads: Mapping[str, Any]) -> dict[str, Found]:
    """Each step's usage (unpriced), place and labels, by step id, from its trace data (by step id)."""
    return {i: (usage_of(p), place_of(p), labels_of(p)) for i, p in payloads.items()}


def step_usage_columns(
    steps: pd.DataFrame, found: Mapping[str, Found], prices: PricesLike = None,
) -> pd.DataFrame:
    """:data:`STEP_USAGE_COLUMNS` for the steps of ``steps`` (a trace frame), from ``found`` (by step id)."""
    table = as_prices(prices)
    ids = [str(i) for i in steps.index]
    empty = (Usage(), Placed(), Labels())
    pairs = [found.get(i, empty) for i in ids]
    usages = [u.priced(table) for u, _, _ in pairs]
    counted = np.zeros(len(ids), dtype=bool)
    if len(ids):
        runs: dict[tuple[Any, ...], list[int]] = {}
        for position, key in enumerate(zip(steps["user_id"], steps["agent_id"], steps["workflow_id"],
                                           steps["run_id"], strict=True)):
            runs.setdefault(tuple(None if v is None or v != v else v for v in key), []).append(position)
        for positions in runs.values():
            flags = counted_steps((pairs[p][1], usages[p].carried) for p in positions)
            counted[positions] = flags
    return pd.DataFrame({
        "model": pd.Series([u.model for u in usages], index=steps.index, dtype=object),
        **{name: pd.array([getattr(u, name) for u in usages], dtype="Int64") for name in _TOKENS},
        "cost": pd.Series([np.nan if u.cost is None else u.cost for u in usages], index=steps.index,
                          dtype="float64"),
        "usage_counted": pd.Series(counted, index=steps.index, dtype=bool),
        "session_id": pd.Series([labels.session for _, _, labels in pairs], index=steps.index, dtype=object),
        "tags": pd.Series([", ".join(labels.tags) for _, _, labels in pairs], index=steps.index, dtype=object),
    }, index=steps.index)


def with_usage(steps: pd.DataFrame, found: Mapping[str, Found], prices: PricesLike = None
               ) -> pd.DataFrame:
    """``steps`` with :data:`STEP_USAGE_COLUMNS` (replacing any it had) after ``created_at``, before the
    ``params.*`` and ``result.*`` columns."""
    columns = step_usage_columns(steps, found, prices)
    rest = [c for c in steps.columns if c not in STEP_USAGE_COLUMNS]
    cut = rest.index("created_at") + 1 if "created_at" in rest else len(rest)
    return pd.concat([steps[rest[:cut]], columns, steps[rest[cut:]]], axis=1)


class UsageFilters(TypedDict, total=False):
    """The usage filters of :func:`memkit.frames.runs_frame` and :func:`memkit.frames.filter_runs`."""

    model: str | list[str] | None
    session: str | list[str] | None
    tag: str | list[str] | None
    min_tokens: float | None
    max_tokens: float | None
    min_cost: float | None
    max_cost: float | None


def _bound(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise InvalidInputError(f"{name}: a number, got {value!r}")
    return float(value)


def usage_filter(runs: pd.DataFrame, **wanted: Any) -> pd.Series:
    """Which runs of a runs frame match :class:`UsageFilters` (all rows where none is given)."""
    keep = pd.Series(True, index=runs.index)
    unknown = set(wanted) - set(UsageFilters.__annotations__)
    if unknown:
        raise InvalidInputError(f"unknown run filter(s): {', '.join(sorted(unknown))}")
    for key, column in (("model", "models"), ("session", "sessions"), ("tag", "tags")):
        value = wanted.get(key)
        if value is not None:
            names = {value} if isinstance(value, str) else {str(m) for m in value}
            keep &= runs[column].fillna("").map(lambda m, names=names: bool(names.intersection(m.split(", "))))
    for column, low, high in (("tokens_total", "min_tokens", "max_tokens"), ("cost", "min_cost", "max_cost")):
        lo, hi = _bound(wanted.get(low), low), _bound(wanted.get(high), high)
        values = runs[column].astype("float64")
        if lo is not None:
            keep &= values.ge(lo).fillna(False).astype(bool)
        if hi is not None:
            keep &= values.le(hi).fillna(False).astype(bool)
    return keep


def usage_by_model(steps: pd.DataFrame) -> pd.DataFrame:
    """Per model (of the steps whose usage counts): ``steps, tokens_in, tokens_out, tokens_total, cost``."""
    if steps.empty or "usage_counted" not in steps.columns:
        return pd.DataFrame(columns=["steps", *_TOKENS, "cost"], index=pd.Index([], name="model"))
    counted = steps[steps["usage_counted"].to_numpy(dtype=bool)]
    grouped = counted.groupby(counted["model"].fillna("(unknown)"), sort=True)
    out = pd.DataFrame({"steps": grouped.size(),
                        **{n: grouped[n].sum(min_count=1).astype("Int64") for n in _TOKENS},
                        "cost": grouped["cost"].sum(min_count=1)})
    out.index.name = "model"
    return out
