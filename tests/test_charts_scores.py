"""Scores over time and by model or configuration: the researcher's marks and memkit.evaluate results charted.

A real SQLite store: steps of two models marked good or bad, recalls whose memories are marked relevant
or not, and evaluations of the same marks in two search modes; each chart's table is checked against
what was marked.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import memkit
from memkit.charts import VEGA_LITE_MIME, evaluation_chart, marks_chart
from memkit.traces import ExecutionHistory

FACTS = ("TP53 is mutated in sample 7", "BRCA1 frameshift in sample 3", "sample 7 sequenced on a NovaSeq",
         "TP53 loss correlates with poor response", "KRAS G12D in the pancreatic line")


@pytest.fixture
def marked(tmp_path: Path) -> memkit.Memory:
    mem = memkit.open(f"sqlite:///{tmp_path / 's.db'}?embedder=none")
    for fact in FACTS:
        mem.add(fact, "alice", "bio")
    # Steps of two models, marked below: gpt-4o good 3 of 4, claude good 1 of 2.
    for i, model in enumerate(["gpt-4o"] * 4 + ["claude"] * 2):
        mem.add_trace("bio", "answer", {"step_name": "answer", "tool": "llm", "status": "success", "step_index": i,
                                        "run_id": f"r{i}", "model": model}, user_id="alice")
    for step in mem.get_all("alice", "bio", limit=100, filters={"type": "trace", "workflow_id": "answer"}):
        trace = step.metadata["trace"]
        good = trace["step_index"] in (0, 1, 2, 4)
        mem.mark_step(step.id, good=good, user_id="alice", agent_id="bio")
    # Two recalls: TP53's two memories relevant, the others returned not relevant.
    history = ExecutionHistory(memory_provider=mem, workflow_id="lookup", agent_id="bio", user_id="alice")
    for query in ("TP53", "sample"):
        with history.step(f"search {query}", tool="recall"):
            mem.search(query, user_id="alice", agent_id="bio")
    for recall in mem.recalls(user_id="alice", agent_id="bio"):
        for hit in recall.hits:
            mem.mark_memory(recall.id, hit.id, relevant="TP53" in hit.content, user_id="alice", agent_id="bio")
    return mem


def test_marks_by_model_are_the_share_of_good_steps_each_model_got(marked: memkit.Memory) -> None:
    chart = marks_chart(marked, by="model")
    steps = chart.data[chart.data["series"] == "good steps"].set_index("model")
    assert steps.loc["gpt-4o", "share"] == pytest.approx(3 / 4) and steps.loc["gpt-4o", "marks"] == 4
    assert steps.loc["claude", "share"] == pytest.approx(1 / 2) and steps.loc["claude", "marks"] == 2
    # The recalls were made by steps that named no model.
    memories = chart.data[chart.data["series"] == "relevant recalled memories"].set_index("model")
    hits = [h for r in marked.recalls(user_id="alice", agent_id="bio") for h in r.hits]
    relevant = sum("TP53" in h.content for h in hits)
    assert memories.loc["(unknown)", "share"] == pytest.approx(relevant / len(hits))
    assert memories.loc["(unknown)", "marks"] == len(hits)
    assert VEGA_LITE_MIME in chart._repr_mimebundle_()


def test_marks_over_time_are_one_point_per_period_and_model(marked: memkit.Memory) -> None:
    chart = marks_chart(marked, by="time", freq="D")
    today = pd.Timestamp.now(tz="UTC").tz_localize(None).floor("D")
    assert set(chart.data["period"]) == {today}
    shares = chart.data.set_index("series")["share"]
    assert shares["good steps · gpt-4o"] == pytest.approx(0.75) and shares["good steps · claude"] == 0.5
    assert chart.spec["mark"]["type"] == "line" and len(chart.spec["data"]["values"]) == len(chart.data)
    by_workflow = marks_chart(marked, by="workflow").data.set_index(["workflow", "series"])["marks"]
    assert by_workflow[("answer", "good steps")] == 6


def test_evaluations_by_configuration_stand_beside_the_recalls_as_recorded(marked: memkit.Memory) -> None:
    keyword = memkit.evaluate(marked, k=3, mode="keyword")
    chart = evaluation_chart({"keyword": keyword, "keyword k=1": memkit.evaluate(marked, k=1, mode="keyword")})
    values = chart.data.set_index(["config", "score"])["value"]
    assert values[("as recorded", "recall@3")] == pytest.approx(keyword.recall_at_k_then)
    assert values[("keyword", "MRR")] == pytest.approx(keyword.mrr)
    assert list(dict.fromkeys(chart.data["config"])) == ["as recorded", "keyword", "keyword k=1"]
    over_time = evaluation_chart(keyword, by="time", mem=marked).data
    assert set(over_time["score"]) == {"recall@3", "MRR"}
    assert over_time.set_index("score").loc["MRR", "value"] == pytest.approx(keyword.mrr)
    assert over_time["queries"].max() == len(keyword.queries)


def test_bad_arguments_are_refused_clearly(marked: memkit.Memory) -> None:
    with pytest.raises(memkit.InvalidInputError, match="by"):
        marks_chart(marked, by="colour")
    with pytest.raises(memkit.InvalidInputError, match="Evaluation"):
        evaluation_chart({"a": 1})
    with pytest.raises(memkit.InvalidInputError, match="mem="):
        evaluation_chart(memkit.evaluate(marked), by="time")
