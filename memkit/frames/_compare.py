"""Two runs side by side: which steps differ, and how."""

from __future__ import annotations

from typing import Any

import pandas as pd

from memkit._core._port import (
    MemoryProvider,
)
from memkit._sync import Memory
from memkit.frames._reading import _missing, traces_frame
from memkit.frames._runs import _pick_run, _runs_from_steps, run_steps

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
        source = traces_frame(mem, usage=False)  # one read for both runs
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
