"""Runs: one row per (namespace, workflow, run) from the steps, their filters, and one run's steps."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Unpack

import numpy as np
import pandas as pd

from memkit._core._items import status_of
from memkit._core._port import (
    MemoryProvider,
    SupportsGet,
    SupportsPaging,
)
from memkit._core._runs import RunSummary, StepRow, StepUsage, pick_key, run_key, summarise_runs, timing_word
from memkit._sync import Memory, call
from memkit.frames._reading import _since_us, traces_frame, with_agent_keys
from memkit.frames._recalls import _keeps_recalls, _with_recall_counts
from memkit.frames._usage import (
    RUN_USAGE_COLUMNS,
    PricesLike,
    UsageFilters,
    found_of,
    usage_filter,
    with_usage,
)

# -- runs --------------------------------------------------------------------------------

RUN_COLUMNS = (
    "workflow_id", "agent_id", "user_id", "run_id", "started_at", "ended_at", "duration_s", "duration_kind",
    "steps", "failed_steps", "retries", "first_error", "status", "tools", "recalls", *RUN_USAGE_COLUMNS,
)
"""Columns of :func:`runs_frame`, in order (``duration_kind``: ``wall``, ``sum of steps`` or ``unknown``;
``tools``: the tools the run used, comma-separated; ``recalls``: the searches its steps made, ``<NA>`` on a
store that keeps no recalls; then the LLM usage, :data:`memkit.frames._usage.RUN_USAGE_COLUMNS`)."""

_RUN_KEYS = ["user_id", "agent_id", "workflow_id", "run_id"]
_NAT = np.iinfo(np.int64).min


def _normalised(df: pd.DataFrame) -> pd.DataFrame:
    """The step frame with ``status`` as shown (:func:`memkit._core._items.status_of`, once per word)."""
    if df.empty:
        return df
    codes, words = pd.factorize(df["status"].to_numpy(dtype=object), use_na_sentinel=False)
    shown_words = np.array([status_of(w) for w in words], dtype=object)
    shown = pd.Series(shown_words[codes], index=df.index, dtype=object)
    if not shown.equals(df["status"]):
        df = df.assign(status=shown)
    return df


# A run id is long and full of hyphens (``literature-review-alice/review-alice-1``): in a notebook's
# table the browser broke it over three lines. Its cells keep to one line; the table scrolls instead.
_ONE_LINE_INDEX = "<style scoped>.memkit-runs tbody th { white-space: nowrap; }</style>"


class RunsFrame(pd.DataFrame):  # type: ignore[misc]  # pandas is untyped here
    """What :func:`runs_frame` returns: a plain DataFrame whose notebook table keeps each run id on one
    line. A selection or a copy of it stays one; anything pandas accepts, it accepts."""

    @property
    def _constructor(self) -> type[RunsFrame]:
        return RunsFrame

    def _repr_html_(self) -> str | None:
        html: str | None = super()._repr_html_()
        if html is None:
            return None
        return _ONE_LINE_INDEX + html.replace('class="dataframe"', 'class="dataframe memkit-runs"', 1)


def _run_keys(frame: pd.DataFrame) -> list[str]:
    """Each run's printed id (:func:`memkit._core._runs.run_key`: the same in every view and command)."""
    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None

    return [run_key(text(u), text(a), text(w), text(r)) for u, a, w, r in zip(
        frame["user_id"], frame["agent_id"], frame["workflow_id"], frame["run_id"], strict=True)]


def _run_group_ids(steps: pd.DataFrame) -> np.ndarray:
    """A run number per step (0, 1, … in first-seen order) from its (user, agent, workflow, run_id)."""
    codes: np.ndarray | None = None
    for name in _RUN_KEYS:
        column, _ = pd.factorize(steps[name].to_numpy(dtype=object), use_na_sentinel=False)
        codes = column if codes is None else pd.factorize(codes * (int(column.max()) + 1) + column)[0]
    assert codes is not None
    ids: np.ndarray = pd.factorize(codes)[0]
    return ids


def _us(values: pd.Series) -> list[int | None]:
    numbers = values.to_numpy(dtype="datetime64[us]").view("int64")
    return [None if n == _NAT else n for n in numbers.tolist()]


def _texts(values: pd.Series) -> list[str | None]:
    """A column's cells, a cell that is not text read as none (checked in C when all are text)."""
    if pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty"):
        cells: list[str | None] = values.astype(object).where(values.notna(), None).tolist()
        return cells
    return [v if isinstance(v, str) else None for v in values.tolist()]


def _ints(values: pd.Series) -> list[int | None]:
    if pd.api.types.is_integer_dtype(values.dtype):
        return [None if n == _NAT else n for n in values.to_numpy(dtype="int64", na_value=_NAT).tolist()]
    return [v if isinstance(v, int) and not isinstance(v, bool) else None for v in values.tolist()]


def _usages(df: pd.DataFrame) -> list[StepUsage | None]:
    """Each step's usage as its run's totals read it, from the usage columns of a trace frame (``None``
    for a step that names none: every step of a frame read without them)."""
    if "usage_counted" not in df.columns:
        return [None] * len(df)
    tags = df["tags"].fillna("").astype(str)
    named = (df["usage_counted"].to_numpy(dtype=bool) | df["model"].notna().to_numpy()
             | df["session_id"].notna().to_numpy() | tags.ne("").to_numpy())
    used: list[StepUsage | None] = [None] * len(df)
    if named.any():
        some = df[named]
        costs = [None if c != c else c for c in some["cost"].astype("float64").tolist()]
        for position, use in zip(np.flatnonzero(named).tolist(), zip(
                _texts(some["model"]), _ints(some["tokens_in"]), _ints(some["tokens_out"]),
                _ints(some["tokens_total"]), costs, some["usage_counted"].to_numpy(dtype=bool).tolist(),
                _texts(some["session_id"]), [tuple(t.split(", ")) if t else () for t in tags[named].tolist()],
                strict=True), strict=True):
            used[position] = use
    return used


def _summaries(df: pd.DataFrame, counted: bool) -> list[RunSummary]:
    """Each run of a step frame (status as shown), summarised by :func:`memkit._core._runs.summarise_runs`."""
    created = df["created_at"].to_numpy(dtype="datetime64[us]").view("int64")
    df = df.iloc[np.lexsort((np.arange(len(df)), created))]  # the order written
    # Grouped here by run (numpy), each run's steps in the order written, runs in first-seen order.
    group = _run_group_ids(df)
    order = np.argsort(group, kind="stable")
    df = df.iloc[order]
    durations = [None if d != d else round(d * 1e6) for d in df["duration_s"].astype("float64").tolist()]
    recalls = df["recalls"].fillna(0).astype("int64").tolist() if counted else [0] * len(df)
    rows: list[StepRow] = list(zip(
        df["status"].tolist(), _ints(df["step_index"]), _texts(df["step_name"]), _texts(df["tool"]),
        _us(df["started_at"]), durations, _ints(df["retry_count"]), _texts(df["error"]), recalls,
        df["created_at"].to_numpy(dtype="datetime64[us]").view("int64").tolist(), _usages(df), strict=True))
    edges = [0, *(np.flatnonzero(np.diff(group[order])) + 1).tolist(), len(df)]
    firsts = df.iloc[edges[:-1]]
    keys = zip(*(_texts(firsts[name]) for name in _RUN_KEYS), strict=True)
    return summarise_runs(((key, rows[lo:hi]) for key, lo, hi in zip(keys, edges, edges[1:], strict=False)),
                          recalls_kept=counted)


def _runs_from_steps(df: pd.DataFrame) -> pd.DataFrame:
    """One row per run, as :func:`runs_frame` shows it (an empty frame: its columns, typed)."""
    df = _normalised(df)
    counted = "recalls" in df.columns  # a traces_frame(..., recalls=True)
    summaries = _summaries(df, counted) if len(df) else []
    runs = pd.DataFrame({
        "workflow_id": pd.Series([r.workflow_id for r in summaries], dtype=object),
        "agent_id": pd.Series([r.agent_id for r in summaries], dtype=object),
        "user_id": pd.Series([r.user_id for r in summaries], dtype=object),
        "run_id": pd.Series([r.run_id for r in summaries], dtype=object),
        "started_at": pd.to_datetime([r.started_at for r in summaries], utc=True).as_unit("us"),
        "ended_at": pd.to_datetime([r.ended_at for r in summaries], utc=True).as_unit("us"),
        "duration_s": pd.Series([r.duration_s for r in summaries], dtype="float64"),
        "duration_kind": pd.Series([r.duration_kind for r in summaries], dtype=object),
        "steps": pd.Series([r.steps for r in summaries], dtype="int64"),
        "failed_steps": pd.Series([r.failed_steps for r in summaries], dtype="int64"),
        "retries": pd.Series([r.retries for r in summaries], dtype="int64"),
        "first_error": pd.Series([r.first_error for r in summaries], dtype=object),
        "status": pd.Series([r.status for r in summaries], dtype=object),
        "tools": pd.Series([r.tools for r in summaries], dtype=object),
        "recalls": pd.array([r.recalls if counted else pd.NA for r in summaries], dtype="Int64"),
        "models": pd.Series([", ".join(r.models) for r in summaries], dtype=object),
        **{name: pd.array([getattr(r, name) for r in summaries], dtype="Int64")
           for name in ("tokens_in", "tokens_out", "tokens_total")},
        "cost": pd.Series([r.cost for r in summaries], dtype="float64"),
        "sessions": pd.Series([", ".join(r.sessions) for r in summaries], dtype=object),
        "tags": pd.Series([", ".join(r.tags) for r in summaries], dtype=object),
    })
    runs.index = pd.Index([r.key for r in summaries], name="run", dtype=object)
    return runs


def step_starts(steps: pd.DataFrame) -> pd.Series:
    """Each step's start, else its run's (its :func:`runs_frame` ``started_at``): where a chart places it
    in time. Only the runs of steps without a start are summarised (a start needs no usage roll-up)."""
    starts = steps["started_at"]
    untimed = starts.isna().to_numpy()
    if not untimed.any():
        return starts
    keys = pd.Series(_run_keys(steps), index=steps.index, dtype=object)
    theirs = keys.isin(set(keys[untimed])).to_numpy()
    runs = _runs_from_steps(steps[theirs].drop(columns="usage_counted", errors="ignore"))
    return starts.fillna(keys[untimed].map(runs["started_at"]))


def run_positions(steps: pd.DataFrame, runs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row positions in ``steps`` of each run of ``runs`` (a :func:`runs_frame` of those steps), by run id."""
    if steps.empty:
        return {}
    group = _run_group_ids(steps)
    order = np.argsort(group, kind="stable")
    chunks = np.split(order, np.flatnonzero(np.diff(group[order])) + 1)
    firsts = steps.iloc[[int(c[0]) for c in chunks]][_RUN_KEYS]
    keys = _run_keys(firsts.astype(object).where(firsts.notna(), None))
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
    **usage: Unpack[UsageFilters],
) -> pd.DataFrame:
    """The rows of a :func:`runs_frame` that match every filter given (see :func:`runs_frame`)."""
    keep = usage_filter(runs, **usage)
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
    prices: PricesLike = None,
    usage: bool = True,
    **wanted: Unpack[UsageFilters],
) -> pd.DataFrame:
    """One row per workflow run, newest first, indexed by its ``run`` id.

    A run is the steps sharing ``(user_id, agent_id, workflow_id, run_id)`` (a workflow
    without ``run_id`` is one run); its id is ``user/agent/workflow/run_id`` with ``/`` in a part
    written ``%2F`` (:func:`memkit._core._runs.run_key`). Columns (:data:`RUN_COLUMNS`): ``workflow_id,
    agent_id, user_id, run_id``, ``started_at`` / ``ended_at`` (UTC; the first start and last end its
    steps recorded, ``NaT`` when none did: never when they were stored), ``duration_s`` and
    ``duration_kind`` (``wall`` when every step recorded its start, else ``sum of steps``, else
    ``unknown`` and ``NaN``), ``steps`` (a step written once per attempt counts once), ``failed_steps``, ``retries``,
    ``first_error``, ``status`` (``failed`` if any step failed, else ``running``,
    ``unknown`` or ``success``), ``tools`` and ``recalls`` (the searches the run's steps
    made, see :func:`recalls_frame`; ``<NA>`` when the store keeps no recalls, or when
    ``mem`` is a frame read without ``recalls=True``), then the run's LLM usage: ``models``,
    ``tokens_in``, ``tokens_out``, ``tokens_total``, ``cost`` (summed over the steps whose usage
    counts: a parent chain that reports its children's tokens is not counted again; see
    docs/traces.md).

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
    usage
        ``False`` skips reading the steps' usage (its columns stay empty; see :func:`traces_frame`).
    prices
        Price table for steps that recorded tokens and no cost (:class:`memkit.Prices` or a dict
        model -> (input, output) per million tokens).
    model, session, tag, min_tokens, max_tokens, min_cost, max_cost
        Keep runs that used this model, belong to this session, carry this tag (or any of a list) /
        whose ``tokens_total`` or ``cost`` is in this range (a run without the figure is left out by a
        range). A step's session is its ``session_id``, ``session.id`` or ``gen_ai.conversation.id``
        key; its tags are ``tags`` or OpenInference's ``tag.tags``.

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
            recalls=_keeps_recalls(mem), prices=prices, usage=usage,
        )
    return RunsFrame(filter_runs(
        _runs_from_steps(steps), status=status, agent_id=agent_id, user_id=user_id, workflow_id=workflow_id,
        tool=tool, since=since, until=until, min_duration=min_duration, max_duration=max_duration, **wanted,
    ))


def _pick_run(runs: pd.DataFrame, run: str | pd.Series) -> pd.Series:
    if isinstance(run, pd.Series):
        return run
    keys = zip(runs.index, zip(runs["user_id"], runs["agent_id"], runs["workflow_id"], runs["run_id"],
                               strict=True), strict=True)
    return runs.loc[pick_key(keys, run)]


def run_steps(mem: pd.DataFrame | MemoryProvider | Memory, run: str | pd.Series) -> pd.DataFrame:
    """The steps of one run (a :func:`traces_frame` slice, status as shown), in replay order.

    ``run`` is a :func:`runs_frame` id (its index), a row of it, or a ``run_id`` /
    ``workflow_id`` that names exactly one run. Read from a store that keeps recalls, each
    step also has ``recalls`` (searches it made) and ``recalled`` (memories they returned).
    Read from a store, every other key the agent wrote in a step (``model``, ``tokens``, ``cost``...)
    is a ``data.<key>`` column. The last column, ``timing``, says where each step's timing came from: ``recorded`` (its
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
                                 user_id=row["user_id"], usage=False)
        else:
            steps = traces_frame(mem, usage=False)  # the run's usage is read from its payloads below
            row = _pick_run(_runs_from_steps(steps), run)
            steps = steps[steps["workflow_id"].eq(row["workflow_id"]).to_numpy(dtype=bool)]
    keep = np.ones(len(steps), dtype=bool)
    for column in _RUN_KEYS:
        value = row[column]
        keep &= steps[column].isna().to_numpy() if value is None else steps[column].eq(value).to_numpy(dtype=bool)
    chosen = _normalised(steps[keep])
    if not isinstance(mem, pd.DataFrame) and _keeps_recalls(mem) and "recalls" not in chosen.columns:
        chosen = _with_recall_counts(chosen, mem)  # one workflow's recalls: an indexed read
    if not isinstance(mem, pd.DataFrame):
        payloads = _step_payloads(mem, row, chosen)
        chosen = with_usage(with_agent_keys(chosen, payloads), found_of(payloads))
        parents = _parent_positions(chosen, payloads)
        indexes = chosen["step_index"].tolist()
        chosen = chosen.assign(parent_step_index=pd.array(
            [None if p is None else indexes[p] for p in parents], dtype="Int64"))
    return chosen.assign(timing=_timing_of(chosen))


async def _read_payloads(
    provider: MemoryProvider, user: str, agent: str, workflow: str, run_id: Any, wanted: set[str]
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if not isinstance(provider, SupportsPaging):
        if isinstance(provider, SupportsGet):
            for step_id in wanted:
                item = await provider.get(step_id)
                if item is not None and (item.user_id, item.agent_id) == (user, agent):
                    found[step_id] = item.metadata.get("trace")
        return found
    filters: dict[str, Any] = {"type": "trace", "workflow_id": workflow}
    if isinstance(run_id, str):
        filters["run_id"] = run_id
    page, offset = 1000, 0
    while len(found) < len(wanted):
        items = await provider.get_page(user, agent, offset=offset, limit=page, filters=filters)
        found.update((m.id, m.metadata.get("trace")) for m in items if m.id in wanted)
        if len(items) < page:
            break
        offset += page
    return found


def _step_payloads(mem: MemoryProvider | Memory, row: pd.Series, steps: pd.DataFrame) -> dict[str, Any]:
    """One run's trace data by step id (where parents are kept), read a page at a time from the
    run's namespace: a step stored in another namespace is not this run's."""
    user, agent, workflow = row["user_id"], row["agent_id"], row["workflow_id"]
    if not len(steps) or not all(isinstance(v, str) for v in (user, agent, workflow)):
        return {}
    return call(mem, _read_payloads, user, agent, workflow, row["run_id"], {str(i) for i in steps.index})


def _parent_positions(steps: pd.DataFrame, payloads: dict[str, Any]) -> list[int | None]:
    """Each step's parent as a position in ``steps``: named by ``parent_step_index`` or, failing
    that (a span streamed in live, before its parent ended), ``parent_span_id``. ``None`` for a
    top-level step, a parent outside the run, or the step itself."""
    by_index: dict[int, int] = {}
    for position, index in enumerate(steps["step_index"].tolist()):
        if index is not pd.NA and index is not None:
            by_index.setdefault(int(index), position)
    ids = [str(i) for i in steps.index]
    by_span = {d["span_id"]: p for p, i in enumerate(ids)
               if isinstance(d := payloads.get(i), dict) and isinstance(d.get("span_id"), str)}
    parents: list[int | None] = []
    for position, step_id in enumerate(ids):
        data, parent = payloads.get(step_id), None
        if isinstance(data, dict):
            index, span = data.get("parent_step_index"), data.get("parent_span_id")
            if isinstance(index, int) and not isinstance(index, bool) and index in by_index:
                parent = by_index[index]
            elif isinstance(span, str):
                parent = by_span.get(span)
        parents.append(None if parent == position else parent)
    return parents


def _timing_of(steps: pd.DataFrame) -> pd.Series:
    """Where each step's timing came from (:func:`memkit._core._runs.timing_word`)."""
    return pd.Series([timing_word(started, duration) for started, duration in zip(
        steps["started_at"].notna().tolist(), steps["duration_s"].notna().tolist(), strict=True)],
        index=steps.index, dtype=object)
