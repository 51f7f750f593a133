"""Are the SQLite store's saved search snapshots worth their code? The first search of a big namespace in
a process that has just opened the store, with the snapshots a closing store saves (the keyword index,
the vector snapshot) and without them (each state a copy of one file), alternated, medians.

    python bench/snapshots_ab.py --size 100000 --rounds 3

The file is built as ``bench/cold.py`` builds it (``make_varied`` texts, default embedder, ``add_many``
in chunks, the last chunk in a process that closes the store and so saves both snapshots); the
copies drop ``keyword_snapshots``, ``vector_snapshots`` or both. Every run is a fresh process that
opens the copy, searches once in a mode and is told not to save (so every run starts from the same
file); the order of the states turns each round.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import load_average
from bench.cold import MODES, _child, _forget, build, finish
from bench.run import make_queries, make_varied

STATES = {"saved": (), "no_vector_snapshot": ("vector_snapshots",), "no_keyword_index": ("keyword_snapshots",),
          "nothing_saved": ("keyword_snapshots", "vector_snapshots")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    queries = make_queries(make_varied(args.size, seed=11), 2 * args.rounds * len(STATES) * len(MODES), seed=5)
    times: dict[tuple[str, str], list[float]] = {}
    opens: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.db"
        build(base, args.size)
        finish(base, args.size, searched=False)  # closing saves both snapshots
        for state, tables in STATES.items():
            shutil.copy(base, Path(tmp) / f"{state}.db")
            _forget(Path(tmp) / f"{state}.db", tables)
        asked = 0
        names = list(STATES)
        for round_ in range(args.rounds):
            turn = names[round_ % len(names):] + names[:round_ % len(names)]
            for mode in MODES:
                for state in turn:
                    sample = _child(Path(tmp) / f"{state}.db", queries[asked], queries[asked + 1], mode, save=False)
                    asked += 2
                    times.setdefault((state, mode), []).append(sample["first"])
                    opens.setdefault(state, []).append(sample["open"])
    print(f"{args.size:,} memories, default embedder, {args.rounds} alternated rounds, load {load_average()}")
    print("first search after open, ms (median); ratio = state / saved")
    for mode in MODES:
        saved = statistics.median(times[("saved", mode)])
        medians = {state: statistics.median(times[(state, mode)]) for state in STATES}
        cells = [f"{state} {ms:8.1f} ({ms / saved:5.1f}x)" for state, ms in medians.items()]
        print(f"{mode:8} " + "  ".join(cells))
    print("open, ms (median): " + "  ".join(f"{s} {statistics.median(v):.0f}" for s, v in opens.items()))


if __name__ == "__main__":
    main()
