"""The trace panels on a researcher's store: runs of 10 steps that recalled memories.

    python bench/panels.py                    # 300 and 3,000 runs
    python bench/panels.py --runs 300

Builds a SQLite store of N runs x 10 steps (mixed timing keys, a status missing on some
steps, 5 % of runs failing) where every step made 2 searches of 5 hits each, then times,
median of 5 in one process: ``TraceReplay`` construction, ``runs_frame``, ``run_steps``,
``recalls_frame`` (one run), ``compare_runs`` (two runs of one workflow), and each CLI
command (``memkit runs``, ``memkit show``, ``memkit namespaces``, ``memkit stats``, ``memkit search``)
as a fresh process, and ``memkit search --mode semantic|hybrid`` on the same store written with the
default embedder.
Goals: every panel action <= 300 ms at 300 runs and <= 1 s at 3,000; CLI <= 300 ms. ``met`` is
judged on the CPU time (see :func:`median_ms`); both are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memkit
from bench._util import print_table
from memkit._core._recalls import Recall, RecalledMemory

STEPS = 10
_TIMINGS = ("duration", "duration_ms", "latency_ms", "elapsed", "span", "none")


def build(path: Path, runs: int, seed: int = 0, embedder: bool = False) -> str:
    """A store written the way an agent writes it: 40 workflows, mixed timing keys, recalls per step.

    ``embedder``: with the default embedder's vectors (every note and step embedded), else keyword-only.
    """
    rng = random.Random(seed)
    url = f"sqlite:///{path}" + ("" if embedder else "?embedder=none")
    with memkit.open(url) as mem:
        notes = [{"content": f"note {i} about gene {rng.choice(['TP53', 'BRCA2', 'EGFR'])} result {i}",
                  "user_id": "lab", "agent_id": "bio"} for i in range(500)]
        ids = mem.add_many(notes)
        base = datetime(2026, 6, 1, tzinfo=UTC)
        rows: list[dict[str, Any]] = []
        recalls: list[Recall] = []
        for r in range(runs):
            workflow, run_id = f"wf-{r % 40}", f"run-{r}"
            clock = base + timedelta(minutes=7 * r)
            timing = _TIMINGS[r % len(_TIMINGS)]
            failed_at = rng.randrange(STEPS) if rng.random() < 0.05 else -1
            for i in range(STEPS):
                seconds = round(rng.uniform(0.1, 30.0), 3)
                data: dict[str, Any] = {"step_name": f"step_{i}", "tool": rng.choice(["blast", "bwa", "llm"]),
                                        "step_index": i, "run_id": run_id, "parameters": {"gene": "TP53", "k": i}}
                if i % 4 != 3:  # some agents never write a status
                    data["status"] = "failed" if i == failed_at else "success"
                if i == failed_at:
                    data["error"] = "RuntimeError: exit 137 " + "(out of memory) " * 10
                if timing == "duration":
                    data.update(duration=seconds, timestamp=clock.timestamp())
                elif timing in ("duration_ms", "latency_ms"):
                    data.update({timing: seconds * 1000, "started_at": clock.isoformat()})
                elif timing == "elapsed":
                    data.update(elapsed=seconds, start_time=clock.timestamp())
                elif timing == "span":
                    data.update(started_at=clock.isoformat(), ended_at=(clock + timedelta(seconds=seconds)).isoformat())
                rows.append({"workflow_id": workflow, "data": data})
                for q in range(2):
                    recalls.append(Recall(
                        id=uuid.uuid4().hex, created_at=clock, user_id="lab", agent_id="bio", query=f"query {i} {q}",
                        mode="keyword", limit=5, workflow_id=workflow, run_id=run_id, step_index=i,
                        step_name=f"step_{i}", attempt=1,
                        hits=[RecalledMemory(id=ids[(r * 7 + i * 3 + h) % len(ids)], rank=h + 1, score=1.0 / (h + 1),
                                             content=f"note about gene TP53 hit {h}") for h in range(5)],
                    ))
                clock += timedelta(seconds=seconds + 1)
                if i == failed_at:
                    break
        provider = mem.provider
        batch = 2000
        for start in range(0, len(rows), batch):
            for row in rows[start:start + batch]:
                mem.add_trace("bio", row["workflow_id"], row["data"], user_id="lab")
        memkit._sync.run_sync(provider.add_recalls(recalls))  # type: ignore[attr-defined]
    return url


def median_ms(call: Callable[[], Any], repeat: int = 5) -> tuple[float, float]:
    """Median wall time and median CPU time (this process's threads and its finished children), in ms.

    On a shared 2-core machine the wall time swings with the neighbours' load; the CPU time is
    what the action itself costs, and equals the wall time on an idle machine (nothing here waits
    on I/O that the page cache does not hold)."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = time.process_time() + _children_cpu()
        start = time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() + _children_cpu() - before)
    return round(statistics.median(walls) * 1e3, 1), round(statistics.median(cpus) * 1e3, 1)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(url: str, runs: int) -> list[dict[str, Any]]:
    from memkit.frames import compare_runs, recalls_frame, run_steps, runs_frame
    from memkit.widgets import TraceReplay

    goal = 300 if runs <= 300 else 1000
    out: list[dict[str, Any]] = []
    with memkit.open(url) as mem:
        table = runs_frame(mem)
        same = table[table.workflow_id == "wf-1"].index[:2].tolist()
        one = table.loc[same[0]]
        actions: list[tuple[str, Callable[[], Any]]] = [
            ("TraceReplay(mem)", lambda: TraceReplay(mem)),
            ("runs_frame", lambda: runs_frame(mem)),
            ("run_steps", lambda: run_steps(mem, same[0])),
            ("recalls_frame (one run)", lambda: recalls_frame(mem, one["workflow_id"], run_id=one["run_id"])),
            ("compare_runs", lambda: compare_runs(mem, same[0], same[1])),
        ]
        panel = TraceReplay(mem)
        actions += [
            ("panel: open a run", lambda: (setattr(panel, "run", ""), setattr(panel, "run", same[0]))),
            ("panel: compare", lambda: (setattr(panel, "compare_with", ""), setattr(panel, "compare_with", same[1]))),
        ]
        for name, call in actions:
            wall, cpu = median_ms(call)
            out.append({"runs": runs, "action": name, "wall_ms": wall, "cpu_ms": cpu, "goal_ms": goal,
                        "met": cpu <= goal})
    return out + measure_cli(url, runs, same[0])


SEARCH = ["search", "TP53 result", "--user", "lab", "--agent", "bio"]


def measure_cli(url: str, runs: int, run: str, commands: list[list[str]] | None = None,
                label: str = "") -> list[dict[str, Any]]:
    """Each ``memkit`` command as a fresh process against ``url`` (``run``: the one ``show`` opens)."""
    # An installed package has its bytecode compiled; without it every call would compile memkit's
    # modules again (PYTHONDONTWRITEBYTECODE), so an untimed first call of each command writes it.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "MEMKIT_URL": url}
    memkit_bin = str(Path(sys.executable).with_name("memkit"))
    out: list[dict[str, Any]] = []
    for args in commands or (["runs"], ["runs", "--status", "failed"], ["show", run], ["namespaces"], ["stats"],
                             SEARCH):
        subprocess.run([memkit_bin, *args], env=env, capture_output=True, check=True)
        wall, cpu = median_ms(lambda a=args: subprocess.run([memkit_bin, *a], env=env, capture_output=True,
                                                           check=False))
        out.append({"runs": runs, "action": "memkit " + " ".join(args) + label, "wall_ms": wall, "cpu_ms": cpu,
                    "goal_ms": 300, "met": cpu <= 300})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[300, 3000])
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memkit-bench-panels-") as tmp:
        for runs in args.runs:
            started = time.perf_counter()
            url = build(Path(tmp) / f"panels-{runs}.db", runs)
            print(f"built {runs} runs x {STEPS} steps in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            rows += measure(url, runs)
            # The same store with the default embedder's vectors: a search loads them (the saved
            # snapshot) and embeds the query in the command's process.
            url = build(Path(tmp) / f"panels-{runs}-embedded.db", runs, embedder=True)
            rows += measure_cli(url, runs, "", [[*SEARCH, "--mode", mode] for mode in ("semantic", "hybrid")],
                                label=" (default embedder)")
    print_table(rows, ["runs", "action", "wall_ms", "cpu_ms", "goal_ms", "met"])


if __name__ == "__main__":
    main()
