"""What auditing a large store costs: reading the steps' LLM usage and searching inside their payloads.

    python bench/audit.py                 # 100,000 steps (builds the store once)
    python bench/audit.py --steps 20000

The store is ``bench/frames.py``'s (same steps, built once in ``bench/.cache/``), every fifth step an
LLM call with OTel GenAI usage and a model. Reports, median of ``--repeat`` runs: ``traces_frame``
with and without its usage columns, ``runs_frame``, and ``find_steps`` for a word in a tool's output
(all namespaces, and one), with the load average beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import load_average
from bench.frames import steps
from memkit import frames
from memkit.adapters._sqlite import SQLiteAdapter


def usage_steps(start: int, n: int) -> list[dict[str, Any]]:
    items = steps(start, n)
    for k, item in enumerate(items, start=start):
        trace = item["metadata"]["trace"]
        if k % 5 == 0:
            trace.update({"gen_ai.usage.input_tokens": 100 + k % 50, "gen_ai.usage.output_tokens": 20,
                          "gen_ai.response.model": "gpt-4o"})
        if k % 1000 == 3:  # a rare word in a tool's output
            trace["result"] = {"body": f"HTTP 404 for record {k}"}
        item["content"] += " " + str(trace.get("result"))
    return items


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    runs, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cache = Path(__file__).parent / ".cache"
    cache.mkdir(exist_ok=True)
    path = cache / f"audit_{args.steps}_v1.db"
    store = SQLiteAdapter(path, embedder=None)
    if asyncio.run(store.stats()).traces != args.steps:
        asyncio.run(store.reset())
        for start in range(0, args.steps, 20_000):
            asyncio.run(store.add_many(usage_steps(start, min(20_000, args.steps - start))))
    print(f"{args.steps:,} steps, load average {load_average()}")
    seconds, df = timed(lambda: frames.traces_frame(store, usage=False), args.repeat)
    print(f"traces_frame(usage=False): {seconds:.2f} s")
    seconds, df = timed(lambda: frames.traces_frame(store), args.repeat)
    print(f"traces_frame (usage read): {seconds:.2f} s; {int(df['usage_counted'].sum()):,} steps with usage")
    seconds, runs = timed(lambda: frames.runs_frame(store), args.repeat)
    print(f"runs_frame: {seconds:.2f} s for {len(runs):,} runs")
    seconds, found = timed(lambda: frames.find_steps(store, "404"), max(args.repeat, 5))
    print(f"find_steps('404'), every namespace: {seconds * 1e3:.0f} ms, {len(found)} steps")
    seconds, found = timed(lambda: frames.find_steps(store, "404", user_id="system", agent_id="agent1"),
                           max(args.repeat, 5))
    print(f"find_steps('404'), one namespace: {seconds * 1e3:.0f} ms, {len(found)} steps")
    print(f"load average after: {load_average()}")
    store.close()


if __name__ == "__main__":
    main()
