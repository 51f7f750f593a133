"""LLM usage as trace data: each step's model, tokens and cost read from every common spelling, priced
from a user's table, and rolled up per run without counting a parent chain and its LLM call twice.

On a store written the way research agents write (``tests/_research_runs.py``: mixed spellings, steps
without usage, nested chains that report their children's tokens again) every run's totals are
checked against what the generator wrote, on SQLite, memory://, PostgreSQL and FalkorDB.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import memkit
from memkit._core._runs import run_key
from memkit._core._usage import Placed, Prices, Usage, counted_steps, usage_of
from memkit.frames import runs_frame, traces_frame
from tests._research_runs import BACKENDS, PRICES, USAGE_SPELLINGS, ExpectedRun, store_url, write_runs

GPT = {"gpt-4o": (2.5, 10.0)}


@pytest.mark.parametrize(("data", "expected"), [
    ({"gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3, "gen_ai.request.model": "m"},
     Usage("m", 12, 3, 15)),
    ({"gen_ai.usage.prompt_tokens": 12, "gen_ai.usage.completion_tokens": 3, "gen_ai.response.model": "r",
      "gen_ai.request.model": "q"}, Usage("r", 12, 3, 15)),
    ({"llm.token_count.prompt": 5, "llm.token_count.completion": 2, "llm.token_count.total": 9,
      "llm.model_name": "oi"}, Usage("oi", 5, 2, 9)),
    ({"result": {"usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9,
                           "prompt_tokens_details": {"cached_tokens": 4}}, "model": "gpt"}}, Usage("gpt", 8, 1, 9)),
    ({"usage": {"input_tokens": 30, "output_tokens": 4, "cache_read_input_tokens": 100}, "model": "claude"},
     Usage("claude", 30, 4, 34)),
    ({"gen_ai": {"usage": {"input_tokens": 1, "output_tokens": 2}}}, Usage(None, 1, 2, 3)),
    ({"tokens": {"prompt": 120, "completion": 40}, "cost": 0.5, "model": "x"},
     Usage("x", 120, 40, 160, 0.5, "recorded")),
    ({"tokens": {"llm.token_count.prompt": 6, "gen_ai.usage.input_tokens": 6}, "model": "y"}, Usage("y", 6, None, 6)),
    ({"tokens": 77}, Usage(None, None, None, 77)),
    ({"llm.cost.total": 0.25}, Usage(None, None, None, None, 0.25, "recorded")),
    ({"usage_metadata": {"prompt_token_count": 9, "candidates_token_count": 4, "total_token_count": 13},
      "model_name": "gemini"}, Usage("gemini", 9, 4, 13)),
    ({"cost_usd": 0.5, "tokens": {"input": 1, "output": 2, "total": 3}}, Usage(None, 1, 2, 3, 0.5, "recorded")),
    ({"cost": {"total": 0.75, "input": 0.5}}, Usage(None, None, None, None, 0.75, "recorded")),
    # A request's max_tokens and model are not usage; a tool's own numbers are not tokens.
    ({"parameters": {"max_tokens": 500, "model": "asked"}, "result": {"total": 3, "hits": 2}}, Usage("asked")),
    ({"usage": {"input_tokens": True, "output_tokens": -1, "total_tokens": 1.5}, "cost": float("nan")}, Usage()),
    ({"attributes": '{"gen_ai.usage.input_tokens": 4, "gen_ai.usage.output_tokens": 1}'}, Usage(None, 4, 1, 5)),
])
def test_every_spelling_reads_as_one_usage(data: dict[str, Any], expected: Usage) -> None:
    assert usage_of(data) == expected


def test_prices_cost_what_the_agent_did_not_record_and_refuse_bad_tables() -> None:
    prices = Prices({"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)})
    assert usage_of({"model": "gpt-4o-2024-08-06", "usage": {"input_tokens": 1000, "output_tokens": 100}},
                    prices).cost == pytest.approx(0.0035)
    assert usage_of({"model": "gpt-4o-mini", "usage": {"input_tokens": 1_000_000}}, prices).cost == pytest.approx(0.15)
    assert usage_of({"model": "gpt-4o", "usage": {"input_tokens": 10}, "cost": 9.0}, prices).cost == 9.0
    assert usage_of({"model": "llama", "usage": {"input_tokens": 10}}, prices).cost is None
    for bad in ({"m": (1,)}, {"m": (-1, 2)}, {"": (1, 2)}, {"m": ("a", 1)}, [("m", (1, 2))]):
        with pytest.raises(memkit.InvalidInputError, match="prices"):
            Prices(bad)  # type: ignore[arg-type]


def test_a_run_counts_leaves_with_usage_and_a_parent_only_when_nothing_beneath_it_does() -> None:
    def placed(index: int, parent: int | None = None) -> Placed:
        return Placed(index, None, parent, None)

    # chain(0) > llm(1) and llm(2) both with usage; tool(3) under llm(2) without; orphan(4) with usage.
    steps = [(placed(0), True), (placed(1, 0), True), (placed(2, 0), True), (placed(3, 2), False), (placed(4), True)]
    assert counted_steps(steps) == [False, True, True, False, True]
    # Nothing beneath the chain reports usage: the chain counts. Span ids work as step indexes do.
    spans = [(Placed(None, "a", None, None), True), (Placed(None, "b", None, "a"), False)]
    assert counted_steps(spans) == [True, False]
    cycle = [(placed(0, 1), True), (placed(1, 0), True)]  # a broken tree does not loop
    assert counted_steps(cycle) == [False, False]


def test_a_chain_and_its_llm_call_roll_up_once_in_every_view() -> None:
    with memkit.open("memory://") as mem:
        mem.add_trace("bio", "wf", {"step_name": "chain", "tool": "llm", "step_index": 0, "run_id": "r",
                                    "usage": {"prompt_tokens": 30, "completion_tokens": 12}}, user_id="u")
        mem.add_trace("bio", "wf", {"step_name": "call", "tool": "llm", "step_index": 1, "parent_step_index": 0,
                                    "run_id": "r", "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 12,
                                    "gen_ai.response.model": "gpt-4o"}, user_id="u")
        mem.add_trace("bio", "wf", {"step_name": "fetch", "tool": "fetch", "step_index": 2, "run_id": "r"},
                      user_id="u")
        steps = traces_frame(mem, prices=GPT)
        assert list(steps["usage_counted"]) == [False, True, False]
        assert list(steps["tokens_total"]) == [42, 42, pd.NA]
        run = runs_frame(mem, prices=GPT).loc["u/bio/wf/r"]
        assert (run["tokens_in"], run["tokens_out"], run["tokens_total"], run["models"]) == (30, 12, 42, "gpt-4o")
        assert run["cost"] == pytest.approx((30 * 2.5 + 12 * 10.0) / 1e6)
        assert math.isnan(runs_frame(mem).loc["u/bio/wf/r", "cost"])  # no price table, no recorded cost
        assert len(runs_frame(mem, model="gpt-4o", min_tokens=42, max_tokens=42)) == 1
        assert runs_frame(mem, model="claude").empty and runs_frame(mem, min_cost=0.0).empty
        with pytest.raises(memkit.InvalidInputError, match="min_tokens"):
            runs_frame(mem, min_tokens="many")  # type: ignore[arg-type]




@pytest.fixture(scope="module", params=BACKENDS)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[str, memkit.Memory, list[ExpectedRun]]]:
    url = store_url(request.param, request, tmp_path_factory, "usage")
    with memkit.open(url) as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the agents' own keys are not timing
        yield url, mem, write_runs(mem, runs=84)


def _same(got: Any, wanted: float | None) -> bool:
    if wanted is None:
        return got is None or got is pd.NA or (isinstance(got, float) and math.isnan(got))
    return bool(got == pytest.approx(wanted, rel=1e-9, abs=1e-12))


def test_every_runs_usage_is_what_the_agent_wrote(written: tuple[str, memkit.Memory, list[ExpectedRun]]) -> None:
    _, mem, expected = written
    runs = runs_frame(mem, prices=PRICES)
    assert {r.usage_spelling for r in expected} == set(USAGE_SPELLINGS)
    assert any(r.nested and r.usage_spelling != "none" for r in expected)
    for run in expected:
        key = run_key(*run.ids)
        got = runs.loc[key]
        for name in ("tokens_in", "tokens_out", "tokens_total", "cost"):
            assert _same(got[name], getattr(run, name)), (key, run.usage_spelling, run.nested, name)
        assert got["models"] == ", ".join(sorted(run.models)), key
    steps = traces_frame(mem, prices=PRICES)
    # Nothing is counted twice: the counted steps' tokens add up to the runs' totals, store-wide.
    assert int(steps.loc[steps["usage_counted"], "tokens_total"].sum()) == sum(r.tokens_total or 0 for r in expected)
    assert int(runs["tokens_total"].sum()) == sum(r.tokens_total or 0 for r in expected)
    # One user's runs carry only their own usage.
    bob = runs_frame(mem, user_id="bob", prices=PRICES)
    assert int(bob["tokens_total"].sum()) == sum(r.tokens_total or 0 for r in expected if r.user_id == "bob")


def test_trace_replay_shows_usage_in_rows_header_detail_and_every_attribute() -> None:
    from memkit.widgets import TraceReplay

    with memkit.open("memory://") as mem:
        mem.add_trace("bio", "wf", {"step_name": "chain", "tool": "llm", "step_index": 0, "run_id": "r",
                                    "usage": {"prompt_tokens": 30, "completion_tokens": 12}}, user_id="u")
        long = "x" * 400
        mem.add_trace("bio", "wf", {"step_name": "call", "tool": "llm", "step_index": 1, "parent_step_index": 0,
                                    "run_id": "r", "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 12,
                                    "gen_ai.response.model": "gpt-4o", "prompt": long,
                                    "raw": '{"choices": [{"text": "TP53"}]}', "result": {"answer": "TP53"}},
                      user_id="u")
        mem.add_trace("bio", "wf", {"step_name": "plain", "tool": "fetch", "step_index": 0, "run_id": "s"},
                      user_id="u")
        panel = TraceReplay(mem, prices=GPT)
        rows = {r["run"]: r for r in panel.runs}
        assert (rows["u/bio/wf/r"]["tokens"], rows["u/bio/wf/r"]["cost"], rows["u/bio/wf/r"]["models"]) == (
            "42", "$0.000195", "gpt-4o")
        assert (rows["u/bio/wf/s"]["tokens"], rows["u/bio/wf/s"]["cost"]) == ("", "")
        assert panel.options["models"] == ["gpt-4o"]
        panel.filters = {"model": "gpt-4o"}
        assert [r["run"] for r in panel.runs] == ["u/bio/wf/r"]
        panel.filters = {"min_tokens": 43}
        assert panel.runs == []
        panel.filters = {}
        panel.sort = {"column": "tokens_total", "descending": True}
        assert panel.runs[0]["run"] == "u/bio/wf/r"
        panel.run = "u/bio/wf/r"
        assert panel.timeline["usage"] == "42 tokens (30 in / 12 out) · $0.000195 · gpt-4o"
        assert panel.timeline["tokens"] == ["42", "42"] and panel.timeline["model"] == ["", "gpt-4o"]
        panel.step = 0
        facts = dict(panel.detail["facts"])
        assert facts["in run totals"].startswith("no: a step beneath it")
        panel.step = 1
        facts = dict(panel.detail["facts"])
        assert (facts["model"], facts["tokens"], facts["cost"], facts["in run totals"]) == (
            "gpt-4o", "42 tokens (30 in / 12 out)", "$0.000195", "yes")
        attributes = {key: (value, folded) for key, value, folded in panel.detail["attributes"]}
        assert attributes["gen_ai.usage.input_tokens"] == ("30", False)
        assert attributes["prompt"] == (long, True)  # long values are folded in the table
        assert attributes["raw"][0] == '{\n  "choices": [\n    {\n      "text": "TP53"\n    }\n  ]\n}'
        assert attributes["result.answer"] == ("TP53", False) and attributes["step_name"] == ("call", False)


def test_tool_stats_sums_each_tools_counted_usage_and_gives_p95() -> None:
    from memkit.frames import tool_stats

    with memkit.open("memory://") as mem:
        for index, (tool, usage) in enumerate([("chain", {"usage": {"input_tokens": 10, "output_tokens": 2}}),
                                               ("llm", {"usage": {"input_tokens": 10, "output_tokens": 2},
                                                        "model": "gpt-4o", "parent_step_index": 0}),
                                               ("llm", {"usage": {"input_tokens": 5, "output_tokens": 1},
                                                        "model": "gpt-4o"}),
                                               ("fetch", {})]):
            mem.add_trace("bio", "wf", {"step_name": f"s{index}", "tool": tool, "step_index": index, "run_id": "r",
                                        "duration": 1.0 + index, **usage}, user_id="u")
        stats = tool_stats(mem, prices=GPT)
        assert stats.loc["llm", "tokens_total"] == 18 and stats.loc["llm", "cost"] == pytest.approx(
            (15 * 2.5 + 3 * 10.0) / 1e6)
        assert stats.loc["chain"].isna()["tokens_total"] and stats.loc["fetch"].isna()["cost"]
        assert stats.loc["llm", "duration_p95_s"] == pytest.approx(2.0 + 0.95)


def test_usage_charts_draw_the_counted_usage(written: tuple[str, memkit.Memory, list[ExpectedRun]]) -> None:
    from memkit.charts import usage_chart

    _, mem, expected = written
    steps = traces_frame(mem, prices=PRICES)
    total = sum(r.tokens_total or 0 for r in expected)
    per_run = usage_chart(steps, by="run", top=1000)
    drawn = per_run.data.groupby("run")["tokens"].sum()
    assert {k: int(v) for k, v in drawn.items()} == {
        run_key(*r.ids): r.tokens_total for r in expected if r.tokens_total}
    by_model = usage_chart(steps, by="model", measure="cost")
    assert by_model.data["cost"].sum() == pytest.approx(sum(r.cost or 0 for r in expected))
    assert set(by_model.data["model"]) >= {"gpt-4o-mini", "gpt-4o", "claude-3-5-sonnet-20241022"}
    over_time = usage_chart(steps, freq="D")
    assert over_time.spec["data"]["values"] and over_time.data["tokens"].sum() <= total
    assert len(usage_chart(steps, by="run", top=5).data["run"].unique()) == 5
    with pytest.raises(memkit.InvalidInputError, match="measure"):
        usage_chart(steps, measure="joules")


def test_memkit_runs_and_show_print_each_runs_usage(
    written: tuple[str, memkit.Memory, list[ExpectedRun]], capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from memkit._serve._runs import PortReads, read_run, read_runs, runs_usage
    from memkit.cli import main

    url, mem, expected = written
    by_key = {run_key(*r.ids): r for r in expected}
    prices = json.dumps({k: list(v) for k, v in PRICES.items()})
    if url == "memory://":  # another process cannot open this store: the commands' reads, on this one
        reads = PortReads(mem)
        listed = read_runs(reads)
        printed = [r.as_json() | u.as_json() for r, u in zip(
            listed, runs_usage(reads, listed, listed, memkit.Prices(PRICES)), strict=True)]
        shown = [read_run(reads, key).priced(memkit.Prices(PRICES)).as_json() for key in list(by_key)[:12]]
    else:
        assert main(["--url", url, "runs", "--json", "--usage", "--prices", prices, "--limit", "1000"]) == 0
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        shown = []
        for key in list(by_key)[:12]:
            assert main(["--url", url, "show", key, "--json", "--prices", prices]) == 0
            shown.append(json.loads(capsys.readouterr().out))
        assert main(["--url", url, "show", next(iter(by_key)), "--prices", prices]) == 0
        text = capsys.readouterr().out
        first = by_key[next(iter(by_key))]
        assert f"{first.tokens_total:,} tokens" in text.splitlines()[0] and "model" in text
    assert len(printed) == len(expected)
    for row in [*printed, *({"run": key, **s} for key, s in zip(list(by_key)[:12], shown, strict=True))]:
        run = by_key[row["run"]]
        for name in ("tokens_in", "tokens_out", "tokens_total", "cost"):
            assert _same(row[name], getattr(run, name)), (row["run"], name)
        assert row["models"] == sorted(run.models), row["run"]


def test_the_readme_usage_example_gives_what_it_says() -> None:
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    code = readme.split("<!-- readme-usage -->\n```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), scope)
    run = scope["runs"].iloc[0]
    assert (run["models"], run["tokens_in"], run["tokens_out"], run["tokens_total"]) == (
        "gpt-4o-2024-08-06", 1200, 300, 1500)
    assert run["cost"] == pytest.approx(0.006)
    found = scope["find_steps"](scope["mem"], "404", tool="fetch")
    assert list(found["run"]) == ["system/bio/qa/r1"] and "404" in found["match"].iloc[0]
    assert scope["latency_stats"](scope["mem"], by="tool").loc["fetch", "latency_p95_s"] == pytest.approx(0.3)


def test_sqlite_reads_only_the_steps_that_may_carry_usage_within_the_namespace_asked(tmp_path: Any) -> None:
    from memkit._sync import run_sync
    from memkit.frames._usage import USAGE_WORDS

    with memkit.open(f"sqlite:///{tmp_path / 'p.db'}?embedder=none") as mem:
        mem.add_trace("bio", "wf", {"step_name": "llm", "step_index": 0, "usage": {"input_tokens": 3}}, user_id="alice")
        mem.add_trace("bio", "wf", {"step_name": "plain", "step_index": 1}, user_id="alice")
        mem.add_trace("bio", "wf", {"step_name": "child", "step_index": 2, "parent_step_index": 1}, user_id="alice")
        mem.add_trace("bio", "wf", {"step_name": "llm", "step_index": 0, "model": "m"}, user_id="bob")
        mem.add("a note on token costs", "alice", "bio")  # not a trace step
        found = run_sync(mem.provider.trace_payloads(user_id="alice", containing=USAGE_WORDS))
        assert sorted(p["step_name"] for p in found.values()) == ["child", "llm"]
        assert len(run_sync(mem.provider.trace_payloads())) == 4  # no words: every step
