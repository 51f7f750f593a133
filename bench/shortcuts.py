"""Each speed-only shortcut of keyword indexing and of the static embedder, on and off, side by side.

    python bench/shortcuts.py                          # every scenario, 100k memories, 3 alternated rounds
    python bench/shortcuts.py --scenario close --size 20000 --rounds 5

What a user waits for, per scenario, in a fresh process per run (CPU time of the process, all
threads, and wall time; medians over the rounds; each round runs every variant once, in an order
rotated from round to round, so load drifts hit them alike):

- ``close``: closing a keyword-only SQLite store right after a bulk import of ``--size`` memories
  (it builds the namespace's keyword index and saves it; a first search with nothing saved does the
  same work). The store is made once per corpus; each run copies it without its saved index, adds
  one memory and times ``close()``.
- ``catchup``: a process that searched its namespace, then bulk-wrote ``--size`` memories: the next
  search (which brings the cached index up to date) is timed.
- ``embed``: ``add_many`` of ``--size`` memories into a fresh SQLite store with the default embedder.

Two corpora: ``notes`` (bench/run.py's Zipf notes) and ``traces`` (step texts shaped like an OTel
import's: JSON with timestamps, durations and hex ids shared by a trace's steps). A variant is the
code as it is with one shortcut switched off (a module constant changed, or one line of a function
replaced before the run); ``all`` is the code as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import dump, print_table  # noqa: E402


def corpus(kind: str, n: int, seed: int = 7) -> list[str]:
    if kind == "notes":
        from bench.run import make_varied

        return [text for text, _ in make_varied(n, seed)]
    rng = random.Random(seed)
    out = []
    run = ""
    for i in range(n):
        if i % 50 == 0:
            run = f"{rng.getrandbits(128):032x}"
        data = {"duration": rng.random() / 1000, "parent_span_id": f"{rng.getrandbits(64):016x}", "run_id": run,
                "span_id": f"{rng.getrandbits(64):016x}",
                "span_kind": rng.choice(["TOOL", "LLM", "CHAIN", "RETRIEVER"]),
                "start_time": 1_764_000_000 + i * 0.013 + rng.random(), "step_index": i % 50,
                "parameters": {"query": f"step {i % 7} of tool {rng.choice(['search', 'fetch', 'rank'])}",
                               "tokens": rng.randint(10, 4000)},
                "status": rng.choice(["success", "success", "success", "error"])}
        out.append(f"[trace] workflow=unknown_service:python agent=agent data={json.dumps(data, sort_keys=True)}")
    return out


# -- variants: one shortcut off -----------------------------------------------------------------


def _replace_line(owner: Any, name: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in the source of ``owner.name`` (a function or method) and install it."""
    function = getattr(owner, name)
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, (name, old)
    module = sys.modules[function.__module__]
    scope: dict[str, Any] = {}
    exec(compile(source.replace(old, new), f"<{name} without a shortcut>", "exec"), module.__dict__, scope)
    setattr(owner, name, scope[name])


def _set(module: str, name: str, value: Any) -> Callable[[], None]:
    return lambda: setattr(importlib.import_module(module), name, value)


def _keyword(name: str, old: str, new: str, owner: str | None = None) -> Callable[[], None]:
    def apply() -> None:
        from memkit._retrieval import _keyword as module

        _replace_line(getattr(module, owner) if owner else module, name, old, new)
    return apply


def _dates_off() -> None:
    from memkit._retrieval import _dates

    _replace_line(_dates, "date_terms", "if words is not None:", "if False:")


def _catchup_off() -> None:
    from memkit.adapters._sqlite import _keywords

    _replace_line(_keywords.KeywordCache, "_catch_up", "index.add_many(texts)", "[index.add(*row) for row in texts]")


def _gc_off() -> None:
    from memkit.adapters._sqlite import _keywords

    _keywords.gc_paused = contextlib.nullcontext  # type: ignore[assignment]


def _embed_off(name: str, old: str, new: str, owner: str | None = None) -> Callable[[], None]:
    def apply() -> None:
        from memkit import embeddings

        _replace_line(getattr(embeddings, owner) if owner else embeddings, name, old, new)
    return apply


def _sums_off() -> None:
    from memkit import embeddings

    embeddings._GATHER_BELOW = 1 << 30  # type: ignore[attr-defined]  # every group gathered whole ...
    embeddings._GROUP = 64  # type: ignore[attr-defined]  # ... 64 texts at a time, as before


VARIANTS: dict[str, dict[str, Callable[[], None] | None]] = {
    "close": {
        "all": None,
        "no ASCII table": _keyword("_tokens", "if text.isascii():", "if False:"),
        "no date-word check": _dates_off,
        "no number stems": _keyword("learn", "numbers = [t for t in unknown if t.isdigit() and t.isascii()]",
                                    "numbers = []", owner="_Stemmer"),
        "no packed bulk postings": _keyword("add_many", "empty = not first and", "empty = False and",
                                            owner="KeywordIndex"),
        "no GC pause": _gc_off,
    },
    "catchup": {"all": None, "no one-batch catch-up": _catchup_off},
    "embed": {
        "all": None,
        "no chunk cache": _embed_off("encode", "if _DROPPED_SPACES.search(text):", "if True:", owner="_WordPiece"),
        "no prefix table": _set("memkit.embeddings", "_SCAN_AFTER", 1 << 62),
        "no batch de-duplication": _embed_off("embed", "if len(distinct) < len(texts):", "if False:",
                                              owner="StaticEmbedder"),
        "no per-position sums": _sums_off,
    },
}


# -- one run, in a child process -------------------------------------------------------------------


def _timed(call: Callable[[], Any]) -> dict[str, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}


def child(scenario: str, variant: str, kind: str, size: int, work: Path) -> dict[str, float]:
    import memkit

    switch = VARIANTS[scenario][variant]
    if switch is not None:
        switch()
    if scenario == "close":
        mem = memkit.open(f"sqlite:///{work}?embedder=none")
        mem.add("one more memory after the import", "bench", "agent")
        return _timed(mem.close)
    texts = corpus(kind, size)
    items = [{"content": text, "user_id": "bench", "agent_id": "agent"} for text in texts]
    if scenario == "catchup":
        mem = memkit.open(f"sqlite:///{work}?embedder=none")
        mem.add_many(items[:1_000])
        mem.search("tool search", "bench", "agent")
        mem.add_many(items[1_000:])
        result = _timed(lambda: mem.search("tool search", "bench", "agent"))
    else:
        mem = memkit.open(f"sqlite:///{work}")
        result = _timed(lambda: mem.add_many(items))
    mem.close()
    return result


def _made(kind: str, size: int, folder: Path) -> Path:
    """A keyword-only store of ``size`` memories of ``kind``, closed, without its saved index."""
    import memkit

    path = folder / f"made-{kind}.db"
    if not path.exists():
        mem = memkit.open(f"sqlite:///{path}?embedder=none")
        mem.add_many([{"content": t, "user_id": "bench", "agent_id": "agent"} for t in corpus(kind, size)])
        mem.close()
        with sqlite3.connect(path) as db:
            db.execute("DELETE FROM keyword_snapshots")
        db.close()
    return path


def run_once(scenario: str, variant: str, kind: str, size: int, folder: Path) -> dict[str, float]:
    work = folder / "run.db"
    for leftover in folder.glob("run.db*"):
        leftover.unlink()
    if scenario == "close":
        shutil.copyfile(_made(kind, size, folder), work)
    out = subprocess.run(
        [sys.executable, __file__, "--child", scenario, variant, kind, str(size), str(work)],
        check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", choices=[*VARIANTS, "all"], default="all")
    parser.add_argument("--corpus", choices=["notes", "traces", "all"], default="all")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="*", help="only these variants (and `all`)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        scenario, variant, kind, size, work = args.child
        print(json.dumps(child(scenario, variant, kind, int(size), Path(work))))
        return
    rows = []
    scenarios = list(VARIANTS) if args.scenario == "all" else [args.scenario]
    kinds = ["notes", "traces"] if args.corpus == "all" else [args.corpus]
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in scenarios:
            for kind in kinds:
                names = [name for name in VARIANTS[scenario] if name == "all" or not args.variants
                         or name in args.variants]
                runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
                for round_ in range(args.rounds):
                    shift = round_ % len(names)
                    for name in names[shift:] + names[:shift]:
                        runs[name].append(run_once(scenario, name, kind, args.size, Path(tmp)))
                base = {m: statistics.median(r[m] for r in runs["all"]) for m in ("cpu", "wall")}
                for name in names:
                    cpu = statistics.median(r["cpu"] for r in runs[name])
                    wall = statistics.median(r["wall"] for r in runs[name])
                    rows.append({"scenario": scenario, "corpus": kind, "variant": name,
                                 "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                                 "cpu_x": round(cpu / base["cpu"], 2), "wall_x": round(wall / base["wall"], 2),
                                 "runs_cpu": [round(r["cpu"], 2) for r in runs[name]]})
                print(f"# {scenario} {kind} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    if args.json:
        print(dump({"size": args.size, "rounds": args.rounds, "rows": rows}))
    else:
        print(f"{args.size:,} memories, median of {args.rounds} alternated rounds; x: the variant's time over `all`'s")
        print_table(rows, ["scenario", "corpus", "variant", "cpu_s", "wall_s", "cpu_x", "wall_x", "runs_cpu"])


if __name__ == "__main__":
    main()
