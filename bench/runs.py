"""What listing runs costs: ``memkit runs`` (a fresh process, as a user types it) and ``runs_frame``.

    python bench/runs.py                                  # this tree, 3,000 runs
    python bench/runs.py --trees /tmp/before .            # two trees side by side, alternated
    python bench/runs.py --runs 10000 --repeat 7

The store (SQLite, built once in ``bench/.cache/``) holds ``--runs`` runs of 8 steps each: timed
steps (a third of the runs record durations and no start) with LLM usage in two spellings, a nested
chain that reports its call's tokens again, a retried step written once per attempt and one failed
run in ten. Each figure is the median of ``--repeat``
rounds; the trees are alternated within each round, so a busy machine slows both alike; the times
are CPU times (of the process, all its threads), which a busy machine blurs less than wall time. Every
measurement runs in a fresh process with ``PYTHONPATH`` set to the tree measured:

* ``memkit runs``: the whole command's CPU time (``--limit 50``; ``--usage`` also reads and rolls up
  the usage of the runs shown);
* ``runs_frame``: the call alone, on the SQLite store and on a ``memory://`` copy of a tenth of it;
* ``success_rate_chart``: the call alone (it places a step without a start at its run's start).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import load_average

T0 = 1.79e9
STEPS = 8


def _steps(run: int) -> list[dict[str, Any]]:
    """One run's steps as ``add_trace`` takes them."""
    failed = run % 10 == 3
    out: list[dict[str, Any]] = []
    start = T0 + run * 60.0
    for index in range(STEPS):
        data: dict[str, Any] = {"step_index": index, "step_name": f"step_{index}", "tool": ("blast", "llm")[index % 2],
                                "status": "success", "timestamp": start + index, "duration": 0.5,
                                "run_id": f"r{run}"}
        if run % 3 == 2:  # a third of the runs record durations and no start
            del data["timestamp"]
        if index % 2:
            data["gen_ai.usage.input_tokens"] = 100 + run % 7
            data["gen_ai.usage.output_tokens"] = 20
            data["gen_ai.response.model"] = "gpt-4o"
        if index == 5:  # a chain that reports its call's tokens again (step 6 ran inside it)
            data["usage"] = {"prompt_tokens": 300, "completion_tokens": 40}
        if index == 6:
            data["parent_step_index"] = 5
        if index == 7 and failed:
            data.update(status="failed", error="TimeoutError: PDB fetch timed out")
        if index == 2:  # a retried step: its attempt, then its outcome
            out.append({**data, "status": "retrying", "duration": 0.1})
        out.append(data)
    return out


def build(path: Path, runs: int) -> None:
    import memkit
    from memkit._core._records import trace_record

    with memkit.open(f"sqlite:///{path}?embedder=none") as mem:
        rows = []
        for run in range(runs):
            for data in _steps(run):
                record = trace_record("agent", f"wf{run % 20}", data, f"user{run % 3}")
                rows.append({"content": record.content, "user_id": record.user_id, "agent_id": record.agent_id,
                             "metadata": record.metadata})
        for start in range(0, len(rows), 20_000):
            mem.add_many(rows[start:start + 20_000])


_FRAME = """
import sys, time, warnings
warnings.simplefilter("ignore")
import memkit
from memkit.charts import success_rate_chart
from memkit.frames import runs_frame
url, runs, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
call = runs_frame if what == "runs_frame" else lambda mem: success_rate_chart(mem).data
with memkit.open(url) as mem:
    if url == "memory://":
        from bench.runs import _steps
        for run in range(runs):
            for data in _steps(run):
                mem.add_trace("agent", f"wf{run % 20}", data, user_id=f"user{run % 3}")
    call(mem)  # imports and first reads out of the timing
    start = time.process_time()
    frame = call(mem)
    print(time.process_time() - start, len(frame))
"""


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{Path(__file__).resolve().parents[1]}"}


def _command(tree: Path, url: str, *extra: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "memkit", "--url", url, "runs", "--limit", "50", *extra], env=_env(tree),
                   check=True, capture_output=True, cwd=tree)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _frame(tree: Path, url: str, runs: int, what: str = "runs_frame") -> float:
    done = subprocess.run([sys.executable, "-c", _FRAME, url, str(runs), what], env=_env(tree), check=True,
                          capture_output=True, text=True, cwd=tree)
    return float(done.stdout.split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--trees", nargs="+", default=["."], help="source trees to measure (each holds memkit/)")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.trees]
    cache = Path(__file__).parent / ".cache"
    cache.mkdir(exist_ok=True)
    path = cache / f"runs_{args.runs}_v2.db"
    if not path.exists():
        build(path, args.runs)
    url = f"sqlite:///{path}?embedder=none"
    measures = {
        "memkit runs": lambda tree: _command(tree, url),
        "memkit runs --usage": lambda tree: _command(tree, url, "--usage"),
        "runs_frame (sqlite)": lambda tree: _frame(tree, url, args.runs),
        f"runs_frame (memory://, {args.runs // 10} runs)": lambda tree: _frame(tree, "memory://", args.runs // 10),
        "success_rate_chart (sqlite)": lambda tree: _frame(tree, url, args.runs, "chart"),
    }
    samples: dict[tuple[str, Path], list[float]] = {}
    for _ in range(args.repeat):
        for name, measure in measures.items():
            for tree in trees:
                samples.setdefault((name, tree), []).append(measure(tree))
    print(f"{args.runs:,} runs x {STEPS} steps, CPU time, median of {args.repeat} alternated rounds, "
          f"load {load_average()}")
    for name in measures:
        medians = [statistics.median(samples[(name, tree)]) for tree in trees]
        ratio = f"  ({medians[-1] / medians[0]:.2f}x of the first)" if len(trees) > 1 else ""
        print(f"{name:<34}" + "  ".join(f"{m * 1e3:8.0f} ms" for m in medians) + ratio)


if __name__ == "__main__":
    main()
