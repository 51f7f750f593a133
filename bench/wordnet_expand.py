"""WordNet hypernyms as a category signal for list questions, measured held out.

    apt-get install wordnet-base          # Debian's WordNet 3.0 database, /usr/share/wordnet; not a memkit dependency
    python bench/wordnet_expand.py [--wordnet /usr/share/wordnet] [--json out.json]

Multi-hop questions are mostly lists ("Which cities has John been to?", "What activities has Melanie
done with her family?") whose evidence names the instances ("Seattle", "swimming") and shares only the
person's name with the question (docs/retrieval.md). WordNet links an instance to its categories:
swimming -> water sport -> sport -> diversion -> activity; Seattle -> city. Each memory (its
speaker/date prefix dropped) gets the lemmas of the hypernyms, up to ``depth`` steps, of the first
``senses`` noun senses of its words; a query's nouns (stopwords and speaker names dropped) are matched
against them. The signal is the IDF-weighted share of the query's nouns a memory reaches only through
its categories (its own words are BM25's), z-scored over the namespace and clipped at 0. The default
hybrid search's fused top ``candidates`` are reordered by ``fused x (1 + weight x signal)``; each
LoCoMo conversation gets the (candidates, depth, senses, weight) that scores best (R@10 + MRR@10) on
the other four, and the report is those held-out numbers per category.
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
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.retrieval import DEFAULT_DATA, Conversation, load_locomo, score
from bench.splade import Row, _summary, held_out, rerank
from memkit import HybridConfig
from memkit._retrieval._keyword import STOPWORDS
from memkit.adapters import SQLiteAdapter
from memkit.embeddings import get_embedder

PREFIX = re.compile(r"^\[[^\]]*\]\s*([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}):\s*")
WORD = re.compile(r"[a-z][a-z'-]*")
QUESTION_WORDS = frozenset("what which who when where how does did do has have is are was were likely would could "
                           "kind kinds type types thing things".split())
NOUN_SUFFIXES = (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
                 ("ies", "y"), ("s", ""))
POOLS = (100, 300)
DEPTHS = (2, 4, 8)
SENSES = (1, 2)
WEIGHTS = (0.0, 0.1, 0.2, 0.35, 0.5, 1.0)


class WordNet:
    """Noun lemmas, their synsets (most frequent sense first) and hypernym links, from WordNet's own files."""

    def __init__(self, folder: str | Path) -> None:
        folder = Path(folder)
        self.index: dict[str, list[str]] = {}
        for line in (folder / "index.noun").read_text(encoding="utf-8").splitlines():
            if line.startswith(" "):
                continue
            parts = line.split()
            n_synsets, n_pointers = int(parts[2]), int(parts[3])
            self.index[parts[0]] = parts[6 + n_pointers : 6 + n_pointers + n_synsets]
        self.lemmas: dict[str, list[str]] = {}
        self.up: dict[str, list[str]] = {}
        for line in (folder / "data.noun").read_text(encoding="utf-8").splitlines():
            if line.startswith(" "):
                continue
            parts = line.split(" | ")[0].split()
            offset, n_words = parts[0], int(parts[3], 16)
            self.lemmas[offset] = [parts[4 + 2 * i].lower() for i in range(n_words)]
            at = 4 + 2 * n_words
            n_ptr = int(parts[at])
            ptrs = [parts[at + 1 + 4 * i : at + 5 + 4 * i] for i in range(n_ptr)]
            self.up[offset] = [p[1] for p in ptrs if p[0] in ("@", "@i") and p[2] == "n"]
        self.exceptions = dict(line.split()[:2] for line in (folder / "noun.exc").read_text().splitlines() if line)

    def lemma(self, word: str) -> str | None:
        """WordNet's base form of a noun (its morphy rules, nouns only), or None if it is not a noun."""
        if word in self.index:
            return word
        if word in self.exceptions:
            return self.exceptions[word]
        for suffix, repl in NOUN_SUFFIXES:
            if word.endswith(suffix) and (base := word[: len(word) - len(suffix)] + repl) in self.index:
                return base
        return None

    def categories(self, lemma: str, senses: int, depth: int) -> set[str]:
        """Lemmas of the hypernyms within ``depth`` steps of the first ``senses`` senses (multiword as one)."""
        out: set[str] = set()
        frontier = self.index.get(lemma, [])[:senses]
        for _ in range(depth):
            frontier = [h for s in frontier for h in self.up.get(s, [])]
            for s in frontier:
                out.update(self.lemmas[s])
        return out


def _content_words(text: str, skip: set[str]) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS and w not in skip]


class CategorySignal:
    """Per namespace and (senses, depth): each memory's category lemmas and their document frequencies."""

    def __init__(self, wn: WordNet, contents: Sequence[str], senses: int, depth: int) -> None:
        self.wn = wn
        self.names = {w.lower() for c in contents if (m := PREFIX.match(c)) for w in m.group(1).split()}
        self.own: list[set[str]] = []
        self.cats: list[set[str]] = []
        memo: dict[str, set[str]] = {}
        for content in contents:
            lemmas = {lem for w in _content_words(PREFIX.sub("", content), self.names) if (lem := wn.lemma(w))}
            cats: set[str] = set()
            for lem in lemmas:
                if lem not in memo:
                    memo[lem] = wn.categories(lem, senses, depth)
                cats |= memo[lem]
            self.own.append(lemmas)
            self.cats.append(cats - lemmas)
        self.df: dict[str, int] = {}
        for cats in self.cats:
            for c in cats:
                self.df[c] = self.df.get(c, 0) + 1

    def head(self, query: str) -> str | None:
        """The category a list question asks for: the first noun after "what"/"which" ("What LGBTQ+
        events ..." -> event), skipping "kind of" and the like; None for other questions."""
        words = WORD.findall(query.lower())
        for k, word in enumerate(words):
            if word in ("what", "which"):
                for w in words[k + 1 :]:
                    if w in STOPWORDS or w in QUESTION_WORDS or w in self.names or w in ("of", "sort", "sorts"):
                        continue
                    if (lem := self.wn.lemma(w)) is not None:
                        return lem if lem in self.df else None
                return None
        return None

    def signal(self, query: str, head: bool = False) -> np.ndarray | None:
        """All of the query's nouns, z-scored (``head`` False), or 1.0 for each memory reaching the
        category a list question names (``head`` True)."""
        if head:
            category = self.head(query)
            if category is None:
                return None
            return np.array([1.0 if category in cats and category not in own else 0.0
                             for cats, own in zip(self.cats, self.own, strict=True)])
        words = _content_words(query, self.names | QUESTION_WORDS)
        lemmas = list(dict.fromkeys(lem for w in words if (lem := self.wn.lemma(w))))
        lemmas = [lem for lem in lemmas if lem in self.df]
        if not lemmas:
            return None
        n = len(self.cats)
        idf = {lem: math.log((n + 1) / (self.df[lem] + 0.5)) for lem in lemmas}
        raw = np.array([sum(idf[lem] for lem in lemmas if lem in cats and lem not in own)
                        for cats, own in zip(self.cats, self.own, strict=True)]) / sum(idf.values())
        if raw.std() == 0:
            return None
        return np.asarray(np.maximum((raw - raw.mean()) / raw.std(), 0.0))


async def run(data: str | Path, wordnet: Path, tmp: Path) -> dict[str, Any]:
    conversations: list[Conversation] = load_locomo(data)
    t0 = time.process_time()
    wn = WordNet(wordnet)
    load_s = time.process_time() - t0
    mem = SQLiteAdapter(tmp / "wordnet.db", embedder=get_embedder("default"))
    grid = [(p, h, d, s, w) for p in POOLS for h in (False, True) for d in DEPTHS for s in SENSES for w in WEIGHTS
            if w > 0 or (h, d, s) == (False, 2, 1)]
    per_variant: dict[tuple[int, bool, int, int, float], list[Row]] = {v: [] for v in grid}
    alone: dict[tuple[bool, int, int], list[Row]] = {(h, d, s): [] for h in (False, True) for d in DEPTHS
                                                     for s in SENSES}
    ingest_s: list[float] = []
    query_s: list[float] = []
    try:
        for conv in conversations:
            await mem.add_many([{"content": m["content"], "metadata": m["metadata"],
                                 "user_id": f"locomo-{conv.name}", "agent_id": "locomo"} for m in conv.memories])
            contents = [m["content"] for m in conv.memories]
            signals: dict[tuple[int, int], CategorySignal] = {}
            for d in DEPTHS:
                for s in SENSES:
                    t0 = time.process_time()
                    signals[(d, s)] = CategorySignal(wn, contents, s, d)
                    ingest_s.append((time.process_time() - t0) / len(contents))
            position = {m["metadata"]["dia_id"]: k for k, m in enumerate(conv.memories)}
            dias = [m["metadata"]["dia_id"] for m in conv.memories]
            for question, evidence, category in conv.questions:
                sig: dict[tuple[bool, int, int], np.ndarray | None] = {}
                for (d, s), cs in signals.items():
                    for h in (False, True):
                        t0 = time.process_time()
                        sig[(h, d, s)] = z = cs.signal(question, head=h)
                        query_s.append(time.process_time() - t0)
                        if z is not None:
                            ranked = [dias[i] for i in np.argsort(-z, kind="stable")]
                            alone[(h, d, s)].append((conv.name, category, score(ranked, evidence)))
                for pool in POOLS:
                    hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=pool, mode="hybrid",
                                            hybrid=HybridConfig(candidates=pool))
                    fused = [(h.metadata["dia_id"], h.score or 0.0) for h in hits]
                    for p, h, d, s, w in grid:
                        if p != pool:
                            continue
                        z = sig[(h, d, s)]
                        order = fused
                        if z is not None and w > 0:
                            order = rerank(fused, z, position, w)
                        ranked = [x for x, _ in order]
                        per_variant[(p, h, d, s, w)].append((conv.name, category, score(ranked, evidence)))
    finally:
        await mem.aclose()
    rows, picked = held_out(per_variant, [c.name for c in conversations])
    # the same selection restricted to the default pool, to separate the signal from candidates=300
    rows100, picked100 = held_out({v: r for v, r in per_variant.items() if v[0] == 100},
                                  [c.name for c in conversations])
    return {"data": str(data), "wordnet": str(wordnet), "load_cpu_s": round(load_s, 2),
            "default": _summary(per_variant[(100, False, 2, 1, 0.0)]),
            "candidates300": _summary(per_variant[(300, False, 2, 1, 0.0)]),
            "out_of_fold": _summary(rows), "picked": picked,
            "out_of_fold_pool100": _summary(rows100), "picked_pool100": picked100,
            "signal_alone": {f"{'head' if h else 'all'} depth={d} senses={s}": _summary(r)
                             for (h, d, s), r in alone.items()},
            "cpu_ms_per_memory": round(1000 * statistics.median(ingest_s), 3),
            "cpu_ms_per_query_p50": round(1000 * statistics.median(query_s), 3),
            "variants": {f"pool={p} {'head' if h else 'all'} depth={d} senses={s} weight={w}": _summary(r)
                         for (p, h, d, s, w), r in per_variant.items()}}


def _print(report: dict[str, Any], keys: Iterable[str]) -> None:
    for key in keys:
        block = report[key]
        cells = " ".join(f"{label} {r[1]:.3f}" for label, r in block.items() if label != "overall")
        print(f"{key}: R@5/R@10/MRR@10 {'/'.join(f'{x:.3f}' for x in block['overall'])}; R@10 {cells}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo-format JSON file")
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"),
                        help="a WordNet 3.0 database folder (index.noun, data.noun, noun.exc)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memkit-wordnet-") as tmp:
        report = asyncio.run(run(args.data, args.wordnet, Path(tmp)))
    _print(report, ("default", "candidates300", "out_of_fold", "out_of_fold_pool100"))
    _print(report["signal_alone"], report["signal_alone"])
    print("picked:", report["picked"], "\npicked (pool 100):", report["picked_pool100"])
    print(f"WordNet load {report['load_cpu_s']} s CPU; per memory {report['cpu_ms_per_memory']} ms, "
          f"per query p50 {report['cpu_ms_per_query_p50']} ms")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
