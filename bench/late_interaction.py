"""Late interaction over the static model's token vectors as a reranker, measured held out.

    python bench/late_interaction.py [--data ../shared/eval/locomo-dev.json] [--json out.json]

ColBERT-style MaxSim without a model download: the default embedder's token table is
already on disk. For each query token (stopwords, punctuation and the conversation's
speaker names dropped), the best cosine over a memory's tokens (the speaker/date prefix
dropped; an exact match scores 0, since BM25 already counts it), z-scored over the
namespace, clipped at ``threshold``, averaged with IDF weights over the query tokens.
The default hybrid search's fused top 100 (``limit=100``, the candidates it ranks) is then
reordered by ``fused x (1 + weight x signal)``. Each LoCoMo conversation gets the
(weight, threshold) that scores best (R@10 + MRR@10) on the other four; the report is
those held-out numbers, per category, next to the default's, and the signal's own ranking
of the whole namespace. The numbers are in docs/retrieval.md ("Routes measured").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.retrieval import CATEGORIES, DEFAULT_DATA, Conversation, load_locomo, score
from memkit._retrieval._keyword import STOPWORDS
from memkit.adapters import SQLiteAdapter
from memkit.embeddings import StaticEmbedder, get_embedder

PREFIX = re.compile(r"^\[[^\]]*\]\s*([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}):\s*")
QUESTION_WORDS = "what which who when where how does did do has have is are was were likely would could"
GRID = ((0.0, 0.0), *((w, t) for w in (0.05, 0.1, 0.2, 0.4) for t in (0.0, 1.0, 2.0)))
Row = tuple[str, int, tuple[float, float, float]]


class MaxSim:
    """Per namespace: each memory's token ids (flattened), document frequencies and speaker-name ids."""

    def __init__(self, embedder: StaticEmbedder, contents: Sequence[str]) -> None:
        table = np.asarray(embedder._vectors[:-1], dtype=np.float32)  # the shipped table, without padding
        centred = table - table.mean(axis=0)  # uncentred token vectors all look alike (docs/retrieval.md)
        self.unit = centred / np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-9)
        self.embedder = embedder
        vocab = embedder._tokenizer.ids
        self.skip = {i for word in (*STOPWORDS, *QUESTION_WORDS.split()) for i in embedder.token_ids(word)}
        self.skip |= {i for token, i in vocab.items() if not any(ch.isalnum() for ch in token)}
        names = {m.group(1) for c in contents if (m := PREFIX.match(c))}
        self.names = {i for name in names for i in embedder.token_ids(name)}
        docs = [sorted({i for i in embedder.token_ids(PREFIX.sub("", c)) if i not in self.skip}) or [0]
                for c in contents]
        self.df: dict[int, int] = {}
        for ids in docs:
            for i in ids:
                self.df[i] = self.df.get(i, 0) + 1
        self.ids = np.array(sorted(self.df))
        where = {t: k for k, t in enumerate(self.ids.tolist())}
        self.flat = np.concatenate([[where[i] for i in ids] for ids in docs])
        self.starts = np.concatenate([[0], np.cumsum([len(ids) for ids in docs])[:-1]])

    def signal(self, query: str) -> np.ndarray | None:
        """Per memory, the IDF-weighted mean over query tokens of the positive MaxSim z-score."""
        qids = [i for i in dict.fromkeys(self.embedder.token_ids(query)) if i not in self.skip | self.names]
        if not qids:
            return None
        n = len(self.starts)
        weights = np.array([math.log((n + 1) / (self.df.get(i, 0) + 0.5)) for i in qids])
        sims = self.unit[qids] @ self.unit[self.ids].T
        sims[sims > 0.999] = 0.0
        best = np.maximum.reduceat(sims[:, self.flat], self.starts, axis=1)
        z = (best - best.mean(axis=1, keepdims=True)) / (best.std(axis=1, keepdims=True) + 1e-6)
        return np.asarray((weights @ np.maximum(z, 0.0)) / weights.sum())


def _mean(rows: Sequence[Row]) -> list[float]:
    return [round(statistics.fmean(r[2][i] for r in rows), 4) if rows else float("nan") for i in range(3)]


def _summary(rows: Sequence[Row]) -> dict[str, Any]:
    return {"overall": _mean(rows), **{label: _mean([r for r in rows if r[1] == c]) for c, label in CATEGORIES.items()}}


async def run(data: str | Path, tmp: Path) -> dict[str, Any]:
    conversations: list[Conversation] = load_locomo(data)
    embedder = get_embedder("default")
    assert isinstance(embedder, StaticEmbedder)
    mem = SQLiteAdapter(tmp / "late.db", embedder=embedder)
    per_variant: dict[tuple[float, float], list[Row]] = {v: [] for v in GRID}
    alone: list[Row] = []
    try:
        for conv in conversations:
            await mem.add_many([{"content": m["content"], "metadata": m["metadata"],
                                 "user_id": f"locomo-{conv.name}", "agent_id": "locomo"} for m in conv.memories])
            maxsim = MaxSim(embedder, [m["content"] for m in conv.memories])
            position = {m["metadata"]["dia_id"]: k for k, m in enumerate(conv.memories)}
            dias = [m["metadata"]["dia_id"] for m in conv.memories]
            for question, evidence, category in conv.questions:
                hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=100, mode="hybrid")
                fused = [(h.metadata["dia_id"], h.score or 0.0) for h in hits]
                signal = maxsim.signal(question)
                if signal is not None:
                    alone.append((conv.name, category, score([dias[i] for i in np.argsort(-signal)], evidence)))
                for weight, threshold in GRID:
                    order = [d for d, _ in fused]
                    if signal is not None and weight > 0:
                        lift = {d: 1.0 + weight * max(0.0, float(signal[position[d]]) - threshold) for d, _ in fused}
                        order = [d for d, _ in sorted(fused, key=lambda t: -t[1] * lift[t[0]])]
                    per_variant[(weight, threshold)].append((conv.name, category, score(order, evidence)))
    finally:
        await mem.aclose()
    held_out: list[Row] = []
    picked: dict[str, str] = {}
    for conv in conversations:
        def fit(variant: tuple[float, float], held: str = conv.name) -> float:
            _, r10, mrr = _mean([r for r in per_variant[variant] if r[0] != held])
            return r10 + mrr
        best = max(GRID, key=fit)  # the first of equals: weight 0 (the default) is listed first
        picked[conv.name] = f"weight={best[0]} threshold={best[1]}"
        held_out.extend(r for r in per_variant[best] if r[0] == conv.name)
    return {"data": str(data), "default": _summary(per_variant[GRID[0]]), "out_of_fold": _summary(held_out),
            "picked": picked, "signal_alone": _summary(alone),
            "variants": {f"weight={w} threshold={t}": _summary(rows) for (w, t), rows in per_variant.items()}}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo-format JSON file")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memkit-late-") as tmp:
        report = asyncio.run(run(args.data, Path(tmp)))
    for key in ("default", "out_of_fold", "signal_alone"):
        cells = " ".join(f"{label} {r[1]:.3f}" for label, r in report[key].items() if label != "overall")
        print(f"{key}: R@5/R@10/MRR@10 {'/'.join(f'{x:.3f}' for x in report[key]['overall'])}; R@10 {cells}")
    print("picked:", report["picked"])
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
