"""The static embedder gives the same bytes as its previous, simpler computation.

Tokens are now looked up per whitespace-separated chunk (cached), new words are spelt with a
prefix table, identical texts in a batch are embedded once and token vectors are summed one
position at a time. Each must leave every vector bit for bit as it was: the previous code is
frozen below and compared on odd texts (control characters the tokenizer drops, CJK, combining
marks, lone surrogates, empty texts, texts past ``max_tokens``, repeats within a batch).
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memkit.embeddings as embeddings
from memkit.embeddings import StaticEmbedder

ROOT = Path(__file__).resolve().parents[1]

# -- the previous computation, frozen ------------------------------------------------------

_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ASCII_WORD = re.compile(r"[a-z0-9]+|[^a-z0-9\s]")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F or 0x2B740 <= code <= 0x2B81F or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F
    )


class _OldWordPiece:
    def __init__(self, vocab: Sequence[str], max_chars: int = 100) -> None:
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.max_chars = max_chars
        self.word_ids = lru_cache(maxsize=200_000)(self._word_ids)

    @staticmethod
    def _normalise(text: str) -> str:
        out: list[str] = []
        for char in text:
            code = ord(char)
            if code == 0 or code == 0xFFFD or (unicodedata.category(char).startswith("C") and char not in "\t\n\r"):
                continue
            if char.isspace():
                out.append(" ")
            elif _is_cjk(code):
                out.append(f" {char} ")
            else:
                out.append(char)
        text = unicodedata.normalize("NFD", "".join(out).lower())
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def _split(self, text: str) -> list[str]:
        words: list[str] = []
        for chunk in text.split():
            start = 0
            for i, char in enumerate(chunk):
                if _is_punctuation(char):
                    if start < i:
                        words.append(chunk[start:i])
                    words.append(char)
                    start = i + 1
            if start < len(chunk):
                words.append(chunk[start:])
        return words

    def _word_ids(self, word: str) -> tuple[int, ...]:
        if len(word) > self.max_chars:
            return ()
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.ids.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return ()
            pieces.append(found)
            start = end
        return tuple(pieces)

    def encode(self, text: str) -> list[int]:
        if text.isascii():
            words = _ASCII_WORD.findall(_ASCII_CONTROL.sub("", text).lower())
        else:
            words = self._split(self._normalise(text))
        ids: list[int] = []
        for word in words:
            ids.extend(self.word_ids(word))
        return ids


def old_embed(model: StaticEmbedder, tokenizer: _OldWordPiece, texts: Sequence[str]) -> np.ndarray:
    """The previous StaticEmbedder.embed, on the whole unpacked table."""
    out = np.zeros((len(texts), model.dim), dtype=np.float32)
    if not texts:
        return out
    ids = [tokenizer.encode(t)[: model.max_tokens] for t in texts]
    vectors = model._vectors
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    pad = vectors.shape[0] - 1
    for start in range(0, len(order), 64):
        group = order[start : start + 64]
        width = len(ids[group[-1]])
        if width == 0:
            continue
        index = np.full((len(group), width), pad, dtype=np.int64)
        lengths = np.empty(len(group), dtype=np.float32)
        for row, i in enumerate(group):
            index[row, : len(ids[i])] = ids[i]
            lengths[row] = max(len(ids[i]), 1)
        out[group] = vectors[index].sum(axis=1) / lengths[:, None]
    return embeddings._normalise(out)


# -- the texts ---------------------------------------------------------------------------------

_VOCAB = (ROOT / "memkit/_static/minilm-l6-static/vocab.txt").read_text(encoding="utf-8").split("\n")
ODD = [
    "", " ", "\t\n", "x" * 150, "hello " + "x" * 150,
    "a\x0bb", "a\x0cb c", "x\x1cy\x1dz\x1ew\x1fv", "caf\u00e9\x85bar", "\x85", "tab\there\x01x\x7f",
    "ÉCOLE naïve – “quoted” 東京 emoji 🧬 a_b", "東京タワー", "中文字符串没有空格",
    "e\u0301te\u0301", "ΑΣ ΟΔΟΣ σίσυφος", "İstanbul K\u212aelvin", "ﬁne ligature", "\ufeffbom\u200bzero",
    "lone \ud800 surrogate \udfff here", "\x00nul\x00", "\ufffdreplaced", "a\u2028b\u2029c\u3000d\u00a0e",
    "C++ & co; e-mail: a@b.c, price $3.50 (approx.)", "##hash ## #",
    "8983526 002209747 a2a95b8b02c9210c78a4c354035d5b36 3438b7db1d1a6d6e",
    "supercalifragilisticexpialidocious unaffable antidisestablishmentarianism",
    "word " * 600, "ok. " * 300 + "the end",
]


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


def locomo_texts() -> list[str]:
    sample = json.loads((ROOT / "tests/data/locomo_tiny.json").read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(sample)
    return found


@pytest.fixture(scope="module")
def old() -> _OldWordPiece:
    return _OldWordPiece(_VOCAB)


@pytest.fixture(scope="module")
def model() -> StaticEmbedder:
    return StaticEmbedder()


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# -- the tests -----------------------------------------------------------------------------------


def test_token_ids_are_the_previous_ones_on_odd_trace_and_chat_texts(model: StaticEmbedder, old: _OldWordPiece) -> None:
    for text in [*ODD, *trace_texts(300), *locomo_texts()]:
        assert model.token_ids(text) == old.encode(text)[: model.max_tokens], repr(text)
        # twice: the second time every chunk comes from the cache
        assert model.token_ids(text) == old.encode(text)[: model.max_tokens], repr(text)


def test_vectors_are_the_previous_bytes(model: StaticEmbedder, old: _OldWordPiece) -> None:
    texts = [*ODD, *trace_texts(700), *locomo_texts()]
    rng = random.Random(3)
    # batches across the few-texts, group and chunk sizes, with repeats (kept in their places)
    for size in (1, 2, 15, 16, 17, 255, 256, 257, 1024):
        batch = [rng.choice(texts) for _ in range(size)]
        assert _same_bytes(model.embed(batch), old_embed(model, old, batch)), size
    assert _same_bytes(model.embed(texts), old_embed(model, old, texts))
    # a fresh model unpacks only a short batch's rows: still the same bytes
    assert _same_bytes(StaticEmbedder().embed(ODD[:12]), old_embed(model, old, ODD[:12]))


def test_short_max_tokens_cut_the_same_tokens(old: _OldWordPiece) -> None:
    short = StaticEmbedder(max_tokens=5)
    texts = [*ODD, *trace_texts(40)]
    assert _same_bytes(short.embed(texts), old_embed(short, old, texts))
    assert _same_bytes(short.embed(texts[:3]), old_embed(short, old, texts[:3]))


def test_repeated_texts_get_the_same_row(model: StaticEmbedder) -> None:
    texts = ["TP53 is mutated", "", "TP53 is mutated", "lunch", "", "TP53 is mutated"]
    vectors = model.embed(texts)
    assert vectors.shape == (6, model.dim) and vectors.dtype == np.float32
    assert _same_bytes(vectors[0], vectors[2]) and _same_bytes(vectors[0], vectors[5])
    assert not vectors[1].any() and not vectors[4].any()
    assert _same_bytes(vectors[3], model.embed(["lunch"])[0])


_ODD_CHARS = st.sampled_from([*"\x00\x0b\x0c\x1c\x1f\x85\u200b\ufeff\ufffd\u0301\u00a0\u3000\u2028 \t\n#.,!",
                              "東", "ア", "Σ", "İ", "ﬁ", "\ud800", "\udc00", "🧬", "é", "e\u0301"])
_TEXTS = st.lists(
    st.one_of(st.characters(exclude_categories=()), _ODD_CHARS, st.sampled_from(list("abcxyz0189 "))), max_size=60
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_TEXTS, st.sampled_from(ODD)), max_size=8))
def test_any_texts_embed_as_before(texts: list[str]) -> None:
    model, old = _MODEL, _OLD
    for text in texts:
        assert model.token_ids(text) == old.encode(text)[: model.max_tokens], repr(text)
    assert _same_bytes(model.embed(texts), old_embed(model, old, texts))


_MODEL = StaticEmbedder()
_OLD = _OldWordPiece(_VOCAB)

_PIECES = [t for t in _VOCAB if t and t.isascii()]
_PREFIXES = dict.fromkeys((t[:k] for t in _MODEL._tokenizer.ids for k in range(1, len(t))), -1)
_PREFIXES.update(_MODEL._tokenizer.ids)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=6), st.text("abcdefxyz0123456789#", max_size=20))
def test_new_words_are_spelt_as_before_with_the_prefix_table(pieces: list[str], noise: str) -> None:
    tokenizer = _MODEL._tokenizer
    for word in ("".join(p.removeprefix("##") for p in pieces), noise, "".join(pieces) + noise):
        expected = _OLD._word_ids(word)
        assert tokenizer._longest_first(word) == expected
        if len(word) <= tokenizer.max_chars:
            assert tokenizer._scan(word, _PREFIXES) == expected


def test_the_caches_stay_bounded_and_exact(monkeypatch: pytest.MonkeyPatch, old: _OldWordPiece) -> None:
    monkeypatch.setattr(embeddings, "_CHUNKS", 64)
    monkeypatch.setattr(embeddings, "_SCAN_AFTER", 10)  # the prefix table takes over early
    fresh = StaticEmbedder()
    texts = [*trace_texts(400), *ODD, "a" * 70 + " " + "b" * 200]
    assert _same_bytes(fresh.embed(texts), old_embed(fresh, old, texts))
    chunks = fresh._tokenizer.chunks
    assert 0 < len(chunks) <= 64
    assert all(len(chunk) <= embeddings._CHUNK_CHARS for chunk in chunks)
    assert fresh._tokenizer._prefixes is not None
    for text in texts:  # again, from a cache that forgot most of it
        assert fresh.token_ids(text) == old.encode(text)[: fresh.max_tokens]
