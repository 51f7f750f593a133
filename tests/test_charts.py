"""memkit.charts: each picture is a Vega-Lite spec over the same numbers as memkit.frames."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import memkit
from memkit import charts, frames
from memkit._demo import demo_items


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memkit.Memory]:
    with memkit.open(f"sqlite:///{tmp_path_factory.mktemp('c') / 'demo.db'}?embedder=none") as mem:
        mem.add_many(demo_items())
        yield mem


def test_duration_chart_has_every_timed_step_by_tool(demo: memkit.Memory, tmp_path: Path) -> None:
    chart = charts.duration_chart(demo)
    steps = frames.traces_frame(demo)
    assert len(chart.data) == int((steps["duration_s"] > 0).sum())
    assert sorted(chart.data["tool"].unique()) == sorted(steps["tool"].unique())
    bundle = chart._repr_mimebundle_()
    spec = bundle[charts.VEGA_LITE_MIME]
    assert spec["$schema"].endswith("vega-lite/v5.json") and len(spec["data"]["values"]) == len(chart.data)
    assert bundle["text/plain"].startswith("<Chart 'Step duration by tool'")
    chart.save(tmp_path / "d.vl.json")
    assert json.loads((tmp_path / "d.vl.json").read_text()) == spec


def test_failure_heatmap_is_failure_patterns(demo: memkit.Memory) -> None:
    chart = charts.failure_heatmap(demo)
    assert chart.data.equals(frames.failure_patterns(demo))
    assert chart.spec["layer"][0]["mark"] == "rect"
    assert sum(v["count"] for v in chart.spec["data"]["values"]) == int(
        frames.traces_frame(demo)["status"].eq("failed").sum())


def test_success_rate_over_time_counts_every_step(demo: memkit.Memory) -> None:
    chart = charts.success_rate_chart(demo, freq="h")
    steps = frames.traces_frame(demo)
    assert int(chart.data["steps"].sum()) == len(steps)
    ok = (chart.data["success_rate"] * chart.data["steps"]).sum()
    assert round(ok) == int(steps["status"].eq("success").sum())
    json.dumps(chart.spec)  # plain JSON, dates as ISO text


def test_an_empty_store_draws_empty_pictures() -> None:
    with memkit.open("memory://") as mem:
        for make in (charts.duration_chart, charts.failure_heatmap, charts.success_rate_chart):
            chart = make(mem)
            assert chart.data.empty and chart.spec["data"]["values"] == []
