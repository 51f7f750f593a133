"""What marks cost on a researcher's SQLite store: marking, reading them back, and evaluating.

    python bench/marks.py                              # 10k memories, 200 marked recalls
    python bench/marks.py --memories 2000 --recalls 50 --repeat 3

A store of ``--memories`` notes (static embedder) gets ``--recalls`` recorded searches of 10 hits
inside steps; each recall then gets two marks (its first hit relevant, its second not). Reported,
each the median of ``--repeat`` runs in one process: one ``mark_memory`` (a recall read and one
write), ``annotations_frame`` over every mark, and ``memkit.evaluate`` at k=5 in the recalls'
own mode (keyword) and in hybrid mode (every marked query searched again).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memkit
from bench._util import dump, print_table
from bench.run import make_queries, make_texts
from memkit.frames import annotations_frame


def _median_ms(call: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e3, 2)


def run(memories: int, recalls: int, repeat: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        mem = memkit.open(f"sqlite:///{tmp}/marks.db?embedder=static")
        texts = make_texts(memories, seed=1)
        mem.add_many([{"content": t, "metadata": m, "user_id": "u", "agent_id": "a"} for t, m in texts])
        for i, query in enumerate(make_queries(texts, recalls, seed=2)):
            with memkit.recall_scope("wf", step="look up", step_index=i % 10, run_id=f"run-{i // 10}"):
                mem.search(query, user_id="u", agent_id="a", limit=10, mode="keyword")
        kept = [r for r in mem.recalls(user_id="u", agent_id="a") if len(r.hits) >= 2]
        marking = []
        for recall in kept:
            start = time.perf_counter()
            mem.mark_memory(recall.id, recall.hits[0].id, relevant=True, user_id="u", agent_id="a")
            marking.append(time.perf_counter() - start)
            mem.mark_memory(recall.id, recall.hits[1].id, relevant=False, user_id="u", agent_id="a", note="off")
        rows = [
            {"what": "mark_memory (one)", "ms": round(statistics.median(marking) * 1e3, 2)},
            {"what": f"annotations_frame ({2 * len(kept)} marks)",
             "ms": _median_ms(lambda: annotations_frame(mem), repeat)},
            {"what": f"evaluate k=5 keyword ({len(kept)} queries)",
             "ms": _median_ms(lambda: memkit.evaluate(mem, k=5), repeat)},
            {"what": f"evaluate k=5 hybrid ({len(kept)} queries)",
             "ms": _median_ms(lambda: memkit.evaluate(mem, k=5, mode="hybrid"), repeat)},
        ]
        mem.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(args.memories, args.recalls, args.repeat)
    if args.json:
        print(dump(rows))
    else:
        print(f"{args.memories:,} memories, {args.recalls} recorded searches; medians of {args.repeat}")
        print_table(rows, ["what", "ms"])


if __name__ == "__main__":
    main()
