"""The demo store shows the recall audit: a run whose steps recalled, one recall that missed, its replay."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import memkit
from memkit._demo import LATE_RESULT, REVIEW_RUN, load_demo
from memkit.frames import recall_counts, recalls_frame, replay_recall, run_steps, runs_frame, traces_frame
from memkit.traces import ExecutionHistory


def test_the_demo_run_recalled_missed_and_replays(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'demo.db'}") as mem:
        load_demo(mem)
        runs = runs_frame(mem)
        assert runs.index[0] == REVIEW_RUN  # the newest run, first in the list
        review = runs.loc[REVIEW_RUN]
        assert review["status"] == "failed" and review["recalls"] == 2
        steps = run_steps(mem, REVIEW_RUN)
        assert steps["recalls"].tolist() == [1, 1] and steps["timing"].tolist() == ["recorded", "recorded"]
        recalled = recalls_frame(mem, workflow_id=review["workflow_id"])
        missed = recalled[recalled["step_index"] == 1]
        assert LATE_RESULT not in missed["content"].tolist()
        today = replay_recall(mem, missed["recall_id"].iloc[0])
        first = today.iloc[0]
        assert (first["change"], first["new_rank"], first["content"]) == ("new", 1, LATE_RESULT)


def test_store_side_recall_counts_match_the_recalls(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'demo.db'}") as mem:
        load_demo(mem)
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a", run_id="r")
        for _ in range(2):
            with history.step("s", tool="t"):
                mem.search("BLAST", "bob", "bioinformatics", limit=4)
                mem.search("nothing matches zzzz", "bob", "bioinformatics", limit=4, mode="keyword")
        history.close()
        counts = recall_counts(mem).sort_values(["workflow_id", "step_index"], ignore_index=True)
        frame = recalls_frame(mem)
        expected = (frame.groupby(["workflow_id", "run_id", "step_index"])
                    .agg(recalls=("recall_id", "nunique"), recalled=("memory_id", "count")).reset_index()
                    .sort_values(["workflow_id", "step_index"], ignore_index=True))
        assert counts[["recalls", "recalled"]].to_numpy().tolist() == \
            expected[["recalls", "recalled"]].to_numpy().tolist()
        assert counts["workflow_id"].tolist() == expected["workflow_id"].tolist()
        with_counts = traces_frame(mem, workflow_id="wf", recalls=True)
        assert with_counts["recalls"].tolist() == [2, 2] and (with_counts["recalled"] <= 4).all()
        assert isinstance(counts, pd.DataFrame) and counts["step_index"].dtype == "int64"
