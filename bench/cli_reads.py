"""The command line's reads of a SQLite file: its one-shot reads (no models, no event loop) beside its port.

    python bench/cli_reads.py                       # 3,000 runs + 10,000 memories, 11 rounds
    python bench/cli_reads.py --runs 300 --rounds 5

Builds (once, in ``bench/.cache/``) ``bench/panels.py``'s store of N runs x 10 steps with 2 recalls
per step, plus notes up to ``--memories`` in the searched namespace, keyword-only. Then times
``memkit runs``, ``show RUN``, ``namespaces``, ``stats`` and ``search`` each as a fresh process, as
a shell runs it, two ways: ``one-shot`` (the command as it ships: the file read on the command's own
thread) and ``port`` (the same command with the one-shot reads turned off, so it opens the store
and reads through its port). Both are started by the same launcher, alternated command by command
and round by round (which goes first swaps each round). Reported: median wall and CPU (the
process's user + system time) in ms, and port / one-shot ratios, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import load_average, print_table

ROOT = str(Path(__file__).resolve().parents[1])
_LAUNCH = """
import sys
if sys.argv[1] == "port":
    import memkit.store._registry as registry
    registry.one_shot_reads = lambda url: None
from memkit.cli import main
sys.argv = ["memkit", *sys.argv[2:]]
sys.exit(main())
"""


def build(path: Path, runs: int, memories: int) -> str:
    """``bench/panels.py``'s store of ``runs`` runs, and notes in lab/bio up to ``memories`` in all."""
    from bench.panels import build as build_runs

    if path.exists():
        return f"sqlite:///{path}"
    part = path.with_suffix(".part")
    for leftover in path.parent.glob(part.name + "*"):
        leftover.unlink()
    build_runs(part, runs)
    from memkit.adapters._sqlite import SQLiteAdapter

    store = SQLiteAdapter(part, embedder=None)
    have = asyncio.run(store.stats()).memories - asyncio.run(store.stats()).traces
    genes = ("TP53", "BRCA2", "EGFR", "KRAS", "MYC")
    notes = [{"content": f"finding {i}: gene {genes[i % 5]} variant {i % 97} result {i} in sample {i % 131}",
              "user_id": "lab", "agent_id": "bio", "metadata": {"batch": i % 7}} for i in range(have, memories)]
    for start in range(0, len(notes), 5000):
        asyncio.run(store.add_many(notes[start:start + 5000]))
    asyncio.run(store.search("TP53 result", "lab", "bio"))  # saves the keyword index, as a used store has
    store.close()
    part.rename(path)
    for leftover in path.parent.glob(part.name + "*"):  # the store's lock file, named after the file built
        leftover.unlink()
    return f"sqlite:///{path}"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(way: str, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One command as a fresh process: (wall, CPU) in seconds."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _LAUNCH, way, *args], env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{way} {args}: exit {done.returncode}\n{done.stderr.decode()}")
    return wall, _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    cache = Path(__file__).parent / ".cache"
    cache.mkdir(exist_ok=True)
    url = build(cache / f"cli_reads_{args.runs}_{args.memories}_v1.db", args.runs, args.memories)
    # Bytecode compiled as an installed package has it; the worktree first on the path.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "MEMKIT_URL": url,
           "PYTHONPATH": ROOT}
    listed = subprocess.run([sys.executable, "-c", _LAUNCH, "one-shot", "runs", "--json"], env=env,
                            capture_output=True, text=True, check=True).stdout
    run = next(line for line in listed.splitlines() if '"failed"' in line).split('"run": "')[1].split('"')[0]
    commands = [["runs"], ["runs", "--status", "failed"], ["show", run], ["namespaces"], ["stats"],
                ["search", "TP53 result", "--user", "lab", "--agent", "bio"]]
    ways = ("one-shot", "port")
    for command in commands:  # untimed: writes the bytecode, warms the page cache; same output both ways
        outs = [subprocess.run([sys.executable, "-c", _LAUNCH, way, *command], env=env, capture_output=True,
                               check=True).stdout for way in ways]
        assert outs[0] == outs[1], command
    print(f"{url}: load average {load_average()}", file=sys.stderr)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(args.rounds):
        for command in commands:
            for way in ways if r % 2 == 0 else ways[::-1]:
                samples.setdefault((" ".join(command[:1] + command[1:2]), way), []).append(once(way, command, env))
    rows: list[dict[str, Any]] = []
    for command in commands:
        name = " ".join(command[:1] + command[1:2])
        med = {way: (statistics.median(w for w, _ in samples[(name, way)]) * 1e3,
                     statistics.median(c for _, c in samples[(name, way)]) * 1e3) for way in ways}
        rows.append({"command": "memkit " + name, "one-shot wall / cpu": f"{med['one-shot'][0]:.0f} / "
                     f"{med['one-shot'][1]:.0f}", "port wall / cpu": f"{med['port'][0]:.0f} / {med['port'][1]:.0f}",
                     "port / one-shot wall": f"{med['port'][0] / med['one-shot'][0]:.2f}",
                     "port / one-shot cpu": f"{med['port'][1] / med['one-shot'][1]:.2f}"})
    print(f"{args.runs:,} runs x 10 steps, {args.memories:,} memories; {args.rounds} alternated rounds, medians (ms);"
          f" load average after: {load_average()}")
    print_table(rows, list(rows[0]))


if __name__ == "__main__":
    main()
