"""A store written earlier keeps matching: the shipped static model gives every text the vector it
gave before, bit for bit, however the text is batched.

The digests below were computed once from the model's vectors; a change to tokenising or summing
that moves one bit of one vector fails here, and then needs a new model name (the store records the
name and refuses another), not new digests.
"""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest

from memkit.embeddings import StaticEmbedder

# Texts that take each path of the tokenizer: control characters it drops (some of which str.split
# treats as white space), CJK split per character, combining marks and accents stripped, lone
# surrogates, words past 100 characters ([UNK], dropped), texts past max_tokens, empty ones.
ODD = {
    "empty": "",
    "blank": " \t\n",
    "long word": "x" * 150,
    "dropped spaces": "a\x0bb\x0cc x\x1cy\x1dz\x1ew\x1fv caf\u00e9\x85bar",
    "controls": "tab\there\x01x\x7f \x00nul\x00 \ufffdreplaced \ufeffbom\u200bzero",
    "accents and CJK": "ÉCOLE naïve – “quoted” 東京タワー 中文字符串没有空格 emoji 🧬 a_b",
    "combining marks": "e\u0301te\u0301 ΑΣ ΟΔΟΣ σίσυφος İstanbul K\u212aelvin ﬁne",
    "surrogates": "lone \ud800 surrogate \udfff here",
    "unicode spaces": "a\u2028b\u2029c\u3000d\u00a0e",
    "punctuation": "C++ & co; e-mail: a@b.c, price $3.50 (approx.) ##hash ## #",
    "ids": "8983526 002209747 a2a95b8b02c9210c78a4c354035d5b36 3438b7db1d1a6d6e",
    "rare words": "supercalifragilisticexpialidocious unaffable antidisestablishmentarianism",
    "past max_tokens": "word " * 600,
    "chat": "[1:56 pm on 8 May, 2023] Caroline: I went to the LGBTQ support group yesterday!",
}

# sha256 of embed([text]).tobytes() for each text of ODD, and of embed(batch()).tobytes()
ALONE = {
    "empty": "80422bc3d307b4a25bdafcc84ac7fb01cb55a09810e8b0f37bb12e0edb5c48ca",
    "blank": "80422bc3d307b4a25bdafcc84ac7fb01cb55a09810e8b0f37bb12e0edb5c48ca",
    "long word": "80422bc3d307b4a25bdafcc84ac7fb01cb55a09810e8b0f37bb12e0edb5c48ca",
    "dropped spaces": "d0d90fe1f35d2156150099d0e872470a67760b7282c328b8e1015392bec747a6",
    "controls": "0d0467e72e09f7838d8ca6050b6dbcf5ca40410726079108f65bc85c6b929dec",
    "accents and CJK": "6b9988902b30e13f002fd89f02f5e312b8aca36c12ec5bbc3da694fe8a1d9443",
    "combining marks": "594e7934577fd39b28957785d9efe76c18b8ec3598189cf01f80717cdc5aaa93",
    "surrogates": "3a6844150b4a8b90ab940d46662590bce5560dfb033ae266851f359a9c80762d",
    "unicode spaces": "7b801a1250a2416b70f226301115793e2dca78426ec45f63f4ab054bfdaae373",
    "punctuation": "a107e6f827f66a3ff66233a4fa582370c829d8022816dd644389346f5ddda0f7",
    "ids": "8f110a129c11802f2954e00d189e9f9a906f6475eaf0dbfe32fc3ec13c4806cd",
    "rare words": "a8cc18a63c6987ce529576a42827f019d8b9ee6893bf3ba1e9d25cc857587378",
    "past max_tokens": "c8ae8fe145a51eeb9e6b0597ecec7020e8d67ac9a596dac5cd1204ccab68c528",
    "chat": "d5b09aadd8d2c5791a2d52cf64b68fc0e9c261cd2e71d9dca6418850b4eaf33b",
}
BATCH = "241be8158ebd186fb8b9191f889b4ed00e9c2f3e7c461afdc41ad03fcef6ec7e"


def trace_texts(count: int, seed: int = 7) -> list[str]:
    """Step texts shaped like an OTel import's: JSON with hex ids shared by a trace's steps."""
    rng = random.Random(seed)
    out = []
    run = ""
    for i in range(count):
        if i % 50 == 0:
            run = f"{rng.getrandbits(128):032x}"
        data = {"duration": rng.random() / 1000, "parent_span_id": f"{rng.getrandbits(64):016x}", "run_id": run,
                "span_id": f"{rng.getrandbits(64):016x}", "span_kind": rng.choice(["TOOL", "LLM", "CHAIN"]),
                "parameters": {"query": f"seq {i % 7} {i % 3}"}, "status": "success", "step_index": i % 50}
        out.append(f"[trace] workflow=unknown_service:python agent=agent data={json.dumps(data, sort_keys=True)}")
    return out


def batch() -> list[str]:
    """600 texts as a bulk import brings them: trace steps, the odd texts, repeats, in a fixed order."""
    rng = random.Random(3)
    texts = [*trace_texts(500), *ODD.values()]
    texts += rng.choices(texts, k=600 - len(texts))
    rng.shuffle(texts)
    return texts


def _digest(vectors: np.ndarray) -> str:
    return hashlib.sha256(vectors.tobytes()).hexdigest()


@pytest.fixture(scope="module")
def model() -> StaticEmbedder:
    return StaticEmbedder()


def test_each_odd_text_has_the_vector_it_always_had(model: StaticEmbedder) -> None:
    for name, text in ODD.items():
        vectors = model.embed([text])
        assert vectors.shape == (1, model.dim) and vectors.dtype == np.float32
        assert _digest(vectors) == ALONE[name], name


def test_a_bulk_batch_has_the_vectors_it_always_had() -> None:
    # a fresh model: the first batch's chunks all miss the cache, the second's all hit it
    fresh = StaticEmbedder()
    assert _digest(fresh.embed(batch())) == BATCH
    assert _digest(fresh.embed(batch())) == BATCH


def test_a_text_has_one_vector_whatever_its_batch(model: StaticEmbedder) -> None:
    texts = batch()
    together = model.embed(texts)
    alone = {text: model.embed([text])[0].tobytes() for text in dict.fromkeys(texts)}
    assert [row.tobytes() for row in together] == [alone[text] for text in texts]
    for size in (2, 16, 17, 255, 257):
        assert [row.tobytes() for row in model.embed(texts[:size])] == [alone[t] for t in texts[:size]]


def test_what_the_tokenizer_drops_and_splits(model: StaticEmbedder) -> None:
    ids = model.token_ids
    assert ids("e\u0301te\u0301") == ids("ete") == ids("ÉTÉ")  # accents and combining marks stripped
    assert ids("lone \ud800 surrogate \udfff") == ids("lone surrogate")
    assert ids("tab\there\x01x") == ids("tab herex")  # a control character is dropped, not a space
    assert ids("a\x0bb") == ids("ab") != ids("a b")  # ... even one str.split() splits at
    assert ids("東京") == ids("東 京") and len(ids("東京")) == 2
    assert ids("x" * 150) == [] and ids("x" * 150 + " ok") == ids("ok")  # too long: [UNK], dropped
    assert len(ids("word " * 600)) == model.max_tokens
    assert _digest(model.embed(["x" * 150])) == _digest(np.zeros((1, model.dim), dtype=np.float32))
