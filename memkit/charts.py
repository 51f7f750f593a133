"""Pictures of traces: per-tool durations, failure categories by tool, success rate over time, LLM
tokens and cost per run, over time and by model; and scores: the researcher's marks and retrieval
evaluations over time, by model and by configuration.

Each function returns a :class:`Chart`: a Vega-Lite v5 specification with its data
inlined. JupyterLab draws it with the renderer it ships (the
``application/vnd.vegalite.v5+json`` output type), so nothing is fetched and no
charting package is installed; a script reads ``chart.data`` (the pandas table
drawn) or ``chart.spec``, or writes ``chart.save("durations.vl.json")`` for any
Vega-Lite tool.

The numbers come from :mod:`memkit.frames` (``traces_frame``, ``failure_patterns``),
so a picture and a table of the same store always agree.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any, TypeAlias, Unpack

import pandas as pd

from memkit._core._errors import InvalidInputError
from memkit._core._port import MemoryProvider
from memkit._display import status_of
from memkit._evaluate import Evaluation
from memkit._sync import Memory, call, provider_of
from memkit.frames import failure_patterns
from memkit.frames._reading import TraceFilters, _frame
from memkit.frames._runs import _run_keys, step_starts

__all__ = ["VEGA_LITE_MIME", "Chart", "duration_chart", "evaluation_chart", "failure_heatmap", "marks_chart",
           "success_rate_chart", "usage_chart"]

VEGA_LITE_MIME = "application/vnd.vegalite.v5+json"
_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"  # an identifier; never fetched
_STATUS_SCALE = {"domain": ["success", "failed"], "range": ["#2e7d32", "#c62828"]}

Source: TypeAlias = pd.DataFrame | MemoryProvider | Memory


class Chart:
    """A Vega-Lite picture: ``spec`` (a dict), ``data`` (the table drawn), ``title``."""

    def __init__(self, title: str, data: pd.DataFrame, spec: dict[str, Any]) -> None:
        self.title = title
        self.data = data
        self.spec = spec

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return {VEGA_LITE_MIME: self.spec, "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"<Chart {self.title!r}: {len(self.data)} rows>"

    def to_json(self) -> str:
        return json.dumps(self.spec, ensure_ascii=False, indent=1)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the specification (data included) as JSON."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.to_json())


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in df.to_dict("records"):
        clean: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, pd.Timestamp):
                clean[str(key)] = value.isoformat()
            elif (isinstance(value, float) and not math.isfinite(value)) or value is None or value is pd.NA:
                clean[str(key)] = None
            elif hasattr(value, "item"):
                clean[str(key)] = value.item()
            else:
                clean[str(key)] = value
        out.append(clean)
    return out


def _spec(title: str, data: pd.DataFrame, body: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": _SCHEMA, "title": title, "data": {"values": _records(data)},
            "config": {"view": {"stroke": None}, "axis": {"labelFontSize": 11, "titleFontSize": 12}}, **body}


def duration_chart(source: Source, **filters: Unpack[TraceFilters]) -> Chart:
    """How long each tool's steps take: one row per tool, a box of the durations and every step as a tick.

    ``source`` is a :func:`~memkit.frames.traces_frame` or a store (``filters`` go to it).
    The x axis is logarithmic, so a 0.5 s tool and a 20 min tool both read.
    """
    filters.setdefault("usage", False)  # durations and statuses only: no usage read
    df = _frame(source, **filters)
    data = pd.DataFrame({
        "tool": df["tool"].fillna("?").astype(str).to_numpy(),
        "status": df["status"].map(status_of).to_numpy() if len(df) else [],
        "duration_s": df["duration_s"].to_numpy(),
    })
    data = data[data["duration_s"] > 0].reset_index(drop=True)
    order = data.groupby("tool")["duration_s"].median().sort_values(ascending=False).index.tolist()
    x = {"field": "duration_s", "type": "quantitative", "title": "duration (s, log scale)",
         "scale": {"type": "log"}}
    y = {"field": "tool", "type": "nominal", "sort": order, "title": None}
    title = "Step duration by tool"
    spec = _spec(title, data, {
        "width": 520, "height": {"step": 22},
        "layer": [
            # every step as a faint tick (failed ones red), the box of each tool's durations on top
            {"mark": {"type": "tick", "thickness": 1, "opacity": 0.35},
             "encoding": {"x": x, "y": y,
                          "color": {"field": "status", "type": "nominal", "scale": _STATUS_SCALE, "title": "status"},
                          "tooltip": [{"field": "tool"}, {"field": "status"},
                                      {"field": "duration_s", "title": "seconds", "format": ".2f"}]}},
            {"mark": {"type": "boxplot", "extent": "min-max", "size": 12, "opacity": 0.55, "color": "#37474f",
                      "median": {"color": "white", "strokeWidth": 2}},
             "encoding": {"x": x, "y": y}},
        ],
    })
    return Chart(title, data, spec)


def failure_heatmap(source: Source, **filters: Unpack[TraceFilters]) -> Chart:
    """Failed steps by failure category (rows) and tool (columns), the count written in each cell.

    The table is :func:`memkit.frames.failure_patterns` of the same steps.
    """
    filters.setdefault("usage", False)
    data = failure_patterns(_frame(source, **filters))
    title = "Failures by category and tool"
    spec = _spec(title, data, {
        "width": {"step": 46}, "height": {"step": 30},
        "encoding": {
            "x": {"field": "tool", "type": "nominal", "title": "tool", "axis": {"labelAngle": -40}},
            "y": {"field": "category", "type": "nominal", "title": None},
        },
        "layer": [
            {"mark": "rect", "encoding": {
                "color": {"field": "count", "type": "quantitative", "scale": {"scheme": "reds"},
                          "title": "failed steps"},
                "tooltip": [{"field": "category"}, {"field": "tool"}, {"field": "count"}]}},
            {"mark": {"type": "text", "fontSize": 12}, "encoding": {
                "text": {"field": "count", "type": "quantitative"},
                "color": {"condition": {"test": "datum.count > 2", "value": "white"}, "value": "black"}}},
        ],
    })
    return Chart(title, data, spec)


def success_rate_chart(source: Source, freq: str = "D", **filters: Unpack[TraceFilters]) -> Chart:
    """Share of successful steps per period (``freq``: ``"h"``, ``"D"``, ``"W"``…), with the step count.

    A step counts as successful when its status is ``success``; the line is drawn over
    the periods that have steps, and each point says how many steps it stands for.
    """
    filters.setdefault("usage", False)  # durations and statuses only: no usage read
    df = _frame(source, **filters)
    frame = pd.DataFrame({"period": pd.Series(dtype="datetime64[ns]"), "ok": pd.Series(dtype=bool)})
    if len(df):
        # A step is counted when it ran: its own start, else its run's (its steps' first recorded start);
        # never when it was stored. A step of a run that recorded no start is left out, and said so.
        when = step_starts(df)
        ok = df["status"].map(status_of).eq("success")
        known = when.notna().to_numpy()
        frame = pd.DataFrame({"period": when[known].dt.tz_convert("UTC").dt.tz_localize(None).dt.floor(freq),
                              "ok": ok[known].to_numpy()})
    grouped = frame.groupby("period")["ok"]
    data = pd.DataFrame({"steps": grouped.size(), "success_rate": grouped.mean()}).reset_index()
    left_out = len(df) - len(frame)
    title = "Success rate over time" + (
        f" ({left_out:,} steps of runs that recorded no start time left out)" if left_out else "")
    y = {"field": "success_rate", "type": "quantitative", "title": "successful steps",
         "axis": {"format": "%"}, "scale": {"domain": [0, 1]}}
    x = {"field": "period", "type": "temporal", "title": None}
    tooltip = [{"field": "period", "type": "temporal"}, {"field": "steps", "type": "quantitative"},
               {"field": "success_rate", "type": "quantitative", "format": ".0%"}]
    spec = _spec(title, data, {
        "width": 520, "height": 200,
        "layer": [
            {"mark": {"type": "line", "color": "#2e7d32", "point": {"filled": True, "size": 50, "color": "#2e7d32"}},
             "encoding": {"x": x, "y": y, "tooltip": tooltip}},
        ],
    })
    return Chart(title, data, spec)


_MEASURES = {"tokens": ("tokens_total", "tokens"), "cost": ("cost", "cost")}
_USAGE_BY = ("run", "time", "model")


def usage_chart(source: Source, by: str = "time", measure: str = "tokens", freq: str = "D", top: int = 30,
                **filters: Unpack[TraceFilters]) -> Chart:
    """LLM tokens (``measure="tokens"``) or cost (``"cost"``; ``prices=`` goes to the traces read) per
    ``by``: ``"time"`` (per period, ``freq`` as :func:`success_rate_chart`'s, stacked by model),
    ``"run"`` (the ``top`` runs that used the most, by model) or ``"model"``.

    The figures are the steps whose usage counts in their runs' totals (a chain that reports its
    calls' tokens is not counted again, as in :func:`memkit.frames.runs_frame`). A step is placed in
    time by its own start, else by its run's first; one of a run that recorded none is left out.
    """
    if measure not in _MEASURES:
        raise InvalidInputError(f"usage_chart(measure=...): tokens or cost, got {measure!r}")
    if by not in _USAGE_BY:
        raise InvalidInputError(f"usage_chart(by=...): one of {', '.join(_USAGE_BY)}, got {by!r}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidInputError(f"usage_chart(top=...): a positive integer, got {top!r}")
    column, label = _MEASURES[measure]
    df = _frame(source, **filters)
    if "usage_counted" not in df.columns:
        raise InvalidInputError("usage_chart: a traces_frame read with its usage columns (this memkit's)")
    counted = df[df["usage_counted"].to_numpy(dtype=bool) & df[column].notna().to_numpy()]
    value = counted[column].astype("float64")
    model = counted["model"].astype(object).where(counted["model"].notna(), "(unknown)")
    if by == "time":
        when = step_starts(df).loc[counted.index]
        known = when.notna().to_numpy()
        key = when[known].dt.tz_convert("UTC").dt.tz_localize(None).dt.floor(freq)
        data = (pd.DataFrame({"period": key, "model": model[known], label: value[known]})
                .groupby(["period", "model"], as_index=False)[label].sum())
        x: dict[str, Any] = {"field": "period", "type": "temporal", "title": None}
        left_out = len(counted) - int(known.sum())
    elif by == "run":
        keys = pd.Series(_run_keys(counted), index=counted.index, dtype=object)
        data = (pd.DataFrame({"run": keys, "model": model, label: value})
                .groupby(["run", "model"], as_index=False)[label].sum())
        order = data.groupby("run")[label].sum().sort_values(ascending=False).index[:top].tolist()
        data = data[data["run"].isin(order)].reset_index(drop=True)
        x = {"field": "run", "type": "nominal", "sort": order, "title": None, "axis": {"labelAngle": -40}}
        left_out = 0
    else:
        data = pd.DataFrame({"model": model, label: value}).groupby("model", as_index=False)[label].sum()
        x = {"field": "model", "type": "nominal", "sort": "-y", "title": None}
        left_out = 0
    title = f"LLM {label} by {by}" + (f" ({left_out:,} steps of runs that recorded no start left out)"
                                        if left_out else "")
    fmt = ",.0f" if measure == "tokens" else "$,.4f"
    spec = _spec(title, data, {
        "width": 520, "height": 220,
        "mark": {"type": "bar"},
        "encoding": {
            "x": x, "y": {"field": label, "type": "quantitative", "title": label, "aggregate": "sum"},
            "color": {"field": "model", "type": "nominal", "title": "model"},
            "tooltip": [{"field": c, "type": "temporal" if c == "period" else "nominal"}
                        for c in data.columns if c != label] + [{"field": label, "type": "quantitative",
                                                                  "format": fmt}],
        },
    })
    return Chart(title, data, spec)


# -- scores: the researcher's marks and retrieval evaluations ---------------------------------

_MARK_SCORE = {"good": 1.0, "bad": 0.0, "relevant": 1.0, "not_relevant": 0.0}
_MARK_SERIES = {"step": "good steps", "memory": "relevant recalled memories"}
_MARKS_BY = ("time", "model", "workflow")


def _step_models(mem: Memory | MemoryProvider, marks: pd.DataFrame) -> pd.Series:
    """The model of the step each mark is about (a step mark's step; a memory mark's recalling step)."""
    from memkit.frames import traces_frame

    steps = traces_frame(mem)
    by_id = steps["model"]
    place = steps.dropna(subset=["workflow_id", "step_index"]).astype({"step_index": "int64"})
    by_place = place.groupby(["workflow_id", place["run_id"].astype(object).fillna(""), "step_index"])["model"].first()
    models: list[object] = []
    for m in marks.itertuples(index=False):
        if m.kind == "step" and isinstance(m.step_id, str) and m.step_id in by_id.index:
            models.append(by_id.get(m.step_id))
        elif isinstance(m.workflow_id, str) and m.step_index is not pd.NA and m.step_index is not None:
            models.append(by_place.get((m.workflow_id, m.run_id if isinstance(m.run_id, str) else "",
                                        int(m.step_index))))
        else:
            models.append(None)
    return pd.Series(models, index=marks.index, dtype=object).where(lambda s: s.notna(), "(unknown)")


def marks_chart(mem: Memory | MemoryProvider, by: str = "time", freq: str = "D", *,
                workflow_id: str | None = None, user_id: str | None = None, agent_id: str | None = None) -> Chart:
    """The researcher's verdicts as scores: the share of marked steps that are good and of marked recalled
    memories that are relevant, per ``by``: ``"time"`` (per period, ``freq`` as :func:`success_rate_chart`'s,
    one line per kind of mark and model), ``"model"`` (the model of the step marked, or of the step that
    recalled the memory) or ``"workflow"``. Each point says how many marks it stands for.
    """
    from memkit.frames import annotations_frame

    if by not in _MARKS_BY:
        raise InvalidInputError(f"marks_chart(by=...): one of {', '.join(_MARKS_BY)}, got {by!r}")
    marks = annotations_frame(mem, workflow_id, user_id=user_id, agent_id=agent_id)
    marks = marks[marks["label"].isin(_MARK_SCORE)]
    score = marks["label"].map(_MARK_SCORE).astype("float64")
    series = marks["kind"].map(_MARK_SERIES)
    if by == "workflow":
        group = marks["workflow_id"].astype(object).where(marks["workflow_id"].notna(), "(none)")
    else:
        group = _step_models(mem, marks) if len(marks) else pd.Series(dtype=object)
    table = pd.DataFrame({"score": score, "marks": 1, "series": series, by: group})
    if by == "time":
        table["period"] = marks["created_at"].dt.tz_convert("UTC").dt.tz_localize(None).dt.floor(freq)
        table["series"] = table["series"] + " · " + table.pop("time").astype(str)
        keys = ["period", "series"]
    else:
        keys = [by, "series"]
    data = (table.groupby(keys, as_index=False).agg(share=("score", "mean"), marks=("marks", "sum"))
            if len(table) else pd.DataFrame(columns=[*keys, "share", "marks"]))
    y = {"field": "share", "type": "quantitative", "title": "share good / relevant", "axis": {"format": "%"},
         "scale": {"domain": [0, 1]}}
    tooltip = [{"field": k, "type": "temporal" if k == "period" else "nominal"} for k in keys] + [
        {"field": "share", "type": "quantitative", "format": ".0%"}, {"field": "marks", "type": "quantitative"}]
    color = {"field": "series", "type": "nominal", "title": None}
    if by == "time":
        body: dict[str, Any] = {"mark": {"type": "line", "point": {"filled": True, "size": 50}}, "encoding": {
            "x": {"field": "period", "type": "temporal", "title": None}, "y": y, "color": color, "tooltip": tooltip}}
    else:
        body = {"mark": {"type": "bar"}, "encoding": {
            "x": {"field": by, "type": "nominal", "title": None}, "xOffset": {"field": "series"},
            "y": y, "color": color, "tooltip": tooltip}}
    title = f"Marks by {by}: good steps and relevant memories"
    return Chart(title, data, _spec(title, data, {"width": 520, "height": 220, **body}))


def evaluation_chart(results: Evaluation | Mapping[str, Evaluation], by: str = "config", *,
                     mem: Memory | MemoryProvider | None = None, freq: str = "D") -> Chart:
    """Retrieval scores of :func:`memkit.evaluate` results, to see whether a change helped.

    ``results`` is one :class:`~memkit.Evaluation` or a dict of them by configuration name
    (``{"keyword": evaluate(mem, mode="keyword"), "hybrid": evaluate(mem, mode="hybrid")}``).
    ``by="config"``: recall@k and MRR of each configuration beside the recalls as they were recorded;
    ``by="time"``: each configuration's mean scores per period (``freq``) of the recalls' times
    (``mem``, the store that keeps the recalls, says when each was made).
    """
    named = {"evaluation": results} if isinstance(results, Evaluation) else results
    if not isinstance(named, Mapping) or not named or not all(
            isinstance(k, str) and isinstance(v, Evaluation) for k, v in named.items()):
        raise InvalidInputError("evaluation_chart: an Evaluation, or a dict of them by configuration name")
    if by not in ("config", "time"):
        raise InvalidInputError(f"evaluation_chart(by=...): config or time, got {by!r}")
    k = next(iter(named.values())).k
    rows: list[dict[str, Any]] = []
    if by == "config":
        first = next(iter(named.values()))
        for name, scores in [("as recorded", (first.recall_at_k_then, first.mrr_then, first)),
                             *((n, (e.recall_at_k, e.mrr, e)) for n, e in named.items())]:
            recall, mrr, evaluation = scores
            rows += [{"config": name, "score": f"recall@{k}", "value": recall, "queries": len(evaluation.queries)},
                     {"config": name, "score": "MRR", "value": mrr, "queries": len(evaluation.queries)}]
        data = pd.DataFrame(rows, columns=["config", "score", "value", "queries"])
        body: dict[str, Any] = {"mark": {"type": "bar"}, "encoding": {
            "x": {"field": "config", "type": "nominal", "title": None, "sort": None}, "xOffset": {"field": "score"},
            "y": {"field": "value", "type": "quantitative", "title": "score", "scale": {"domain": [0, 1]}},
            "color": {"field": "score", "type": "nominal", "title": None},
            "tooltip": [{"field": "config"}, {"field": "score"}, {"field": "value", "format": ".3f"},
                        {"field": "queries"}]}}
    else:
        if mem is None:
            raise InvalidInputError("evaluation_chart(by='time') needs mem=, the store that keeps the recalls")
        from memkit.frames._recalls import _recalls_of

        made = {r.id: r.created_at for r in call(provider_of(mem), _recalls_of)}
        for name, evaluation in named.items():
            for q in evaluation.queries:
                if q.recall_id in made:
                    rows.append({"period": pd.Timestamp(made[q.recall_id]).tz_convert("UTC").tz_localize(None),
                                 "config": name, f"recall@{k}": q.recall_at_k, "MRR": q.rr})
        table = pd.DataFrame(rows, columns=["period", "config", f"recall@{k}", "MRR"])
        table["period"] = pd.to_datetime(table["period"]).dt.floor(freq)
        data = (table.melt(id_vars=["period", "config"], var_name="score", value_name="value")
                .groupby(["period", "config", "score"], as_index=False).agg(value=("value", "mean"),
                                                                              queries=("value", "size")))
        body = {"mark": {"type": "line", "point": {"filled": True, "size": 50}}, "encoding": {
            "x": {"field": "period", "type": "temporal", "title": None},
            "y": {"field": "value", "type": "quantitative", "title": "score", "scale": {"domain": [0, 1]}},
            "color": {"field": "config", "type": "nominal", "title": None},
            "strokeDash": {"field": "score", "type": "nominal", "title": None},
            "tooltip": [{"field": "period", "type": "temporal"}, {"field": "config"}, {"field": "score"},
                        {"field": "value", "format": ".3f"}, {"field": "queries"}]}}
    title = f"Retrieval scores by {'configuration' if by == 'config' else 'time'} (k={k})"
    return Chart(title, data, _spec(title, data, {"width": 520, "height": 220, **body}))

