"""What TraceReplay shows of a run's LLM usage (run rows, the run header, a step's facts) and of every
key a step's data holds (the attribute table), as JSON-ready cells."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from memkit._display import printable

__all__ = ["attribute_rows", "format_cost", "format_tokens", "run_usage_cells", "step_usage_facts",
           "timeline_usage"]

#: A value longer than this (or on several lines) is folded in the attribute table.
FOLD_CHARS = 160
_MAX_ATTRIBUTES = 2000
_MAX_VALUE_CHARS = 20_000


def _number(value: Any) -> float | None:
    if value is None or value is pd.NA or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def format_tokens(value: Any) -> str:
    number = _number(value)
    return "" if number is None else f"{int(number):,}"


def format_cost(value: Any) -> str:
    """A cost in the price table's currency: four significant digits, never rounded to nothing."""
    number = _number(value)
    if number is None:
        return ""
    return f"${number:.2f}" if number >= 1 else f"${number:.4g}" if number else "$0"


def run_usage_cells(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per run (in ``runs``' order): the usage cells of its row in the run list."""
    cells = []
    for tokens_in, tokens_out, total, cost, models in zip(
            runs["tokens_in"], runs["tokens_out"], runs["tokens_total"], runs["cost"], runs["models"], strict=True):
        cells.append({
            "tokens": format_tokens(total), "tokens_total": None if _number(total) is None else int(total),
            "tokens_title": f"{format_tokens(tokens_in) or '?'} in · {format_tokens(tokens_out) or '?'} out"
            if _number(total) is not None else "no step recorded tokens",
            "cost": format_cost(cost), "cost_value": _number(cost), "models": printable(models or ""),
        })
    return cells


def _usage_text(tokens_in: Any, tokens_out: Any, total: Any) -> str:
    if _number(total) is None:
        return ""
    parts = [f"{format_tokens(total)} tokens"]
    if _number(tokens_in) is not None or _number(tokens_out) is not None:
        parts.append(f"({format_tokens(tokens_in) or '?'} in / {format_tokens(tokens_out) or '?'} out)")
    return " ".join(parts)


def timeline_usage(row: pd.Series, steps: pd.DataFrame) -> dict[str, Any]:
    """The run header's usage line and each step's tokens, cost and model (tooltips and labels)."""
    header = [part for part in (
        _usage_text(row.get("tokens_in"), row.get("tokens_out"), row.get("tokens_total")),
        format_cost(row.get("cost")), printable(row.get("models") or "")) if part]
    has = "tokens_total" in steps.columns
    return {
        "usage": " · ".join(header),
        "tokens": [format_tokens(v) for v in steps["tokens_total"]] if has else [""] * len(steps),
        "cost": [format_cost(v) for v in steps["cost"]] if has else [""] * len(steps),
        "model": [printable(v) if isinstance(v, str) else "" for v in steps["model"]] if has else [""] * len(steps),
    }


def step_usage_facts(row: pd.Series) -> list[tuple[str, str]]:
    """A step's usage as facts of its detail (nothing for a step that recorded none)."""
    if "tokens_total" not in row.index:
        return []
    facts: list[tuple[str, str]] = []
    if isinstance(row["model"], str):
        facts.append(("model", row["model"]))
    tokens = _usage_text(row["tokens_in"], row["tokens_out"], row["tokens_total"])
    if tokens:
        facts.append(("tokens", tokens))
    if _number(row["cost"]) is not None:
        facts.append(("cost", format_cost(row["cost"])))
    if tokens or _number(row["cost"]) is not None:
        facts.append(("in run totals", "yes" if bool(row["usage_counted"]) else
                      "no: a step beneath it reports usage (counted there)"))
    return facts


def _shown(value: Any) -> str:
    """A value as the attribute table shows it: text as written (JSON text pretty-printed), the rest as
    indented JSON."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and len(stripped) <= _MAX_VALUE_CHARS:
            try:
                return json.dumps(json.loads(stripped), indent=2, ensure_ascii=False, default=str)
            except ValueError:
                pass
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def attribute_rows(data: Mapping[str, Any] | None, depth: int = 3) -> list[list[Any]]:
    """Every key of a step's data as ``[key, value text, folded]`` rows, nested mappings as dotted keys
    (up to ``depth`` levels; deeper ones and lists as indented JSON), sorted by key."""
    rows: list[list[Any]] = []
    if not isinstance(data, Mapping):
        return rows
    stack: list[tuple[str, Mapping[str, Any], int]] = [("", data, 0)]
    while stack and len(rows) < _MAX_ATTRIBUTES:
        prefix, node, level = stack.pop()
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, Mapping) and value and level + 1 < depth:
                stack.append((f"{name}.", value, level + 1))
                continue
            text = _shown(value)
            if len(text) > _MAX_VALUE_CHARS:
                text = text[:_MAX_VALUE_CHARS] + f"… ({len(text) - _MAX_VALUE_CHARS:,} more characters)"
            text = printable(text)
            rows.append([printable(name), text, len(text) > FOLD_CHARS or "\n" in text])
    rows.sort(key=lambda r: r[0])
    return rows


#: Steps a payload search reads at most (the runs of the best matches are listed).
PAYLOAD_HITS = 1000


def payload_filter(mem: Any, runs: pd.DataFrame, words: Any) -> tuple[pd.DataFrame, str | None]:
    """The runs of ``runs`` with a step whose inputs, outputs or error contain ``words``
    (:func:`memkit.frames.find_steps`, best match first), and what to say of a search that failed."""
    from memkit._core._errors import MemkitError
    from memkit.frames._audit import find_steps

    if not isinstance(words, str) or not words.strip():
        return runs, None
    try:
        found = find_steps(mem, words, limit=PAYLOAD_HITS)
    except (MemkitError, NotImplementedError) as exc:
        return runs.iloc[:0], f"payload search failed: {exc}"
    order = list(dict.fromkeys(found["run"]))
    return runs[runs.index.isin(order)], None
