"""Dense search over a contiguous matrix and the one hybrid fusion every adapter shares.

Fusion (measured on the LoCoMo dev set, see docs/retrieval.md): plain reciprocal
rank fusion of a strong keyword leg and a weaker dense leg lost to the keyword
leg alone, because RRF gives both legs' top ranks the same weight however good
their matches are. We fuse *scores* instead:

* keyword: the BM25 score divided by the best BM25 score of this query (1.0 for
  the top hit, 0 for memories the keyword leg did not return);
* semantic: the cosine similarity as a z-score against every memory of the
  namespace (how many standard deviations above the namespace's mean similarity),
  divided by ``dense_scale`` and clipped at 0, so a memory only gains from being
  more similar than a typical memory of that namespace;
* fused = ``(1 - alpha) * keyword + alpha * semantic``;
* a memory only the semantic leg found must reach ``min_similarity`` (cosine);
* then each candidate closes ``context`` of the gap to the better of the two
  memories written just before and after it in the namespace, plus a third of that
  for the two written two places away (only candidates count, and only a neighbour
  that scores higher lifts): the answer to a question is often a short turn ("Yes,
  last Friday!") next to the one that matches its words;
* last, a chat line whose speaker the query names ("What does *Melanie* do to
  destress?" and "[date] Melanie: ...") is weighted by ``1 + speaker``: the
  evidence of a question about someone is nearly always what they said.

Candidates are the union of each leg's top ``candidates``; every candidate gets
its real cosine (the dense leg scores the whole namespace anyway), so a keyword
hit ranked low by the dense leg is still judged on its similarity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from memkit._retrieval._config import MODES, HybridConfig, check_hybrid, check_mode, dense_path, modes_for

# numpy is imported by the functions that compute with it: opening a store to read its
# counts or namespaces (the command line) never loads it.
if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "CONTEXT_REACH", "MODES", "SHORTLIST_MIN", "CosineMoments", "DenseScores", "HybridConfig", "Neighbours",
    "Speakers", "VectorIndex", "check_hybrid", "check_mode", "dense_leg", "fuse", "modes_for", "widened",
]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class DenseScores:
    """The semantic leg of one query: every memory's cosine and the namespace's statistics."""

    cosine: dict[Any, float]  # candidate key -> cosine, for the leg's top hits and any key asked for
    ranked: list[Any]  # the leg's own top keys, best first
    mean: float
    std: float
    #: What answered: ``"exact"`` (every row that can pass scored) or ``"index"`` (an approximate
    #: pass chose the rows scored); see :func:`memkit._retrieval._config.dense_path`.
    path: str = "exact"


def _matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    # einsum's own single-threaded SIMD loop, not BLAS: on a busy 2-core machine a
    # threaded sgemv spends more time waiting for its threads than computing
    # (measured: 24 ms vs 45 ms p50 for 100k x 256, see docs/retrieval.md).
    import numpy as np

    result: np.ndarray = np.einsum("ij,j->i", matrix, vector.astype(np.float32, copy=False))
    return result


#: Namespaces at least this large get a coarse shortlist pass (see :class:`VectorIndex`).
SHORTLIST_MIN = 20_000
_COARSE_DIMS = 64
_SHORTLIST = 4_000
#: Vectors widened to float64 at a time for the moments (12 MB at 384 dimensions, reused).
_MOMENT_ROWS = 4_096


class CosineMoments:
    """First and second moments of a namespace's unit vectors: the exact mean and standard
    deviation of any query's cosine over the namespace, without the vectors themselves.

    :class:`VectorIndex` keeps one beside its matrix; the graph adapters, whose vectors live in
    the database, read a namespace's vectors once to build one.
    """

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.count = 0
        self.sum = np.zeros(dim, dtype=np.float64)
        self.moment = np.zeros((dim, dim), dtype=np.float64)

    @classmethod
    def restore(cls, count: int, total: np.ndarray, moment: np.ndarray) -> CosineMoments:
        """Moments saved as ``(count, sum, moment)``."""
        import numpy as np

        out = cls(len(total))
        out.count = count
        out.sum = np.array(total, dtype=np.float64)
        out.moment = np.array(moment, dtype=np.float64)
        return out

    def add(self, vectors: np.ndarray) -> None:
        import numpy as np

        # A slice at a time: a namespace's vectors widened at once are twice their float32 size
        # in fresh memory (300 MB at 100k), which cost more to fault in than the products.
        for start in range(0, len(vectors), _MOMENT_ROWS):
            wide = np.asarray(vectors[start : start + _MOMENT_ROWS], dtype=np.float64)
            self.count += len(wide)
            self.sum += wide.sum(axis=0)
            self.moment += wide.T @ wide

    def remove(self, vectors: np.ndarray) -> None:
        import numpy as np

        wide = np.asarray(vectors, dtype=np.float64)
        self.count -= len(wide)
        self.sum -= wide.sum(axis=0)
        self.moment -= wide.T @ wide

    def stats(self, query: np.ndarray) -> tuple[float, float]:
        """Mean and standard deviation of ``query``'s cosine over the vectors, exactly."""
        import numpy as np

        if self.count == 0:
            return 0.0, 0.0
        q = query.astype(np.float64)
        mean = float(self.sum @ q) / self.count
        var = float(q @ self.moment @ q) / self.count - mean * mean
        return mean, math.sqrt(max(var, 0.0))


class VectorIndex:
    """Unit vectors of one namespace in one contiguous float32 matrix, keyed by an int.

    Appends are amortised O(1) (capacity doubles); removal compacts. Small
    namespaces are scored exactly (one matrix-vector product). From
    :data:`SHORTLIST_MIN` vectors on, a query first scores a 64-dimensional
    projection onto the namespace's own principal axes (a quarter of the memory
    traffic), then rescores the best ``20 x depth`` (at least 4,000) exactly; the
    namespace's mean and standard deviation of similarity, which fusion needs, come
    exactly from running first and second moments without touching the matrix.

    An index can be saved (:meth:`state`) and restored (:meth:`restore`) without
    recomputing its moments and projections, which cost far more than reading them.
    A restored index may start *partial*: its coarse projections are in memory but
    its leading vectors are not; the shortlist pass then reads the few vectors it
    rescores through ``rows(keys)``, and anything that needs them all (a full scan,
    a removal) must call :meth:`materialize` first, which reads them through
    ``whole()``.
    """

    def __init__(self, dim: int) -> None:
        import numpy as np

        self.dim = dim
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._keys = np.zeros(0, dtype=np.int64)
        self._size = 0
        # key -> position, built when first asked for (a restored index of sorted keys bisects instead)
        self._position: dict[int, int] | None = {}
        self._sorted: bool | None = None  # keys ascending (None: not checked since the last change)
        self._moments = CosineMoments(dim)
        self._basis: np.ndarray | None = None
        self._coarse = np.zeros((0, 0), dtype=np.float32)
        # A partial index: rows [0, _missing) are not in _matrix yet (see materialize).
        self._missing = 0
        self._rows: Callable[[np.ndarray], np.ndarray] | None = None
        self._whole: Callable[[], np.ndarray] | None = None

    def __len__(self) -> int:
        return self._size

    @property
    def partial(self) -> bool:
        """Some vectors are not in memory yet (see :meth:`materialize`)."""
        return self._missing > 0

    def needs_all(self, depth: int) -> bool:
        """Whether a ``depth``-deep query without filters scores every vector (no shortlist)."""
        return self._basis is None or max(depth * 20, _SHORTLIST) >= self._size

    def state(self, matrix: bool = True) -> dict[str, np.ndarray]:
        """Everything :meth:`restore` needs, as arrays (read whole first); without ``matrix``, all but
        the vectors, which a partial index with a shortlist has without reading them."""
        n = self._size
        out: dict[str, np.ndarray] = {"keys": self._keys[:n], "sum": self._moments.sum, "moment": self._moments.moment}
        if matrix:
            self.materialize()
            out["matrix"] = self._matrix[:n]
        elif self._basis is None:
            raise ValueError("only an index with a shortlist is restored without its vectors")
        if self._basis is not None:
            out["basis"] = self._basis
            out["coarse"] = self._coarse[:n]
        return out

    @classmethod
    def restore(
        cls,
        dim: int,
        arrays: dict[str, np.ndarray],
        rows: Callable[[np.ndarray], np.ndarray] | None = None,
        whole: Callable[[], np.ndarray] | None = None,
    ) -> VectorIndex:
        """An index from :meth:`state`'s arrays; without ``arrays["matrix"]`` a partial one reading
        rows by key through ``rows`` and all of them through ``whole`` (only with a shortlist)."""
        import numpy as np

        keys = arrays["keys"]
        n = len(keys)
        index = cls(dim)
        capacity = max(n + n // 8, 64)  # room to append without copying at once
        index._keys = np.zeros(capacity, dtype=np.int64)
        index._keys[:n] = keys
        index._size = n
        index._position = None
        index._moments = CosineMoments.restore(n, arrays["sum"], arrays["moment"])
        # np.zeros is lazily backed by the OS: a partial index does not pay for the rows it lacks.
        index._matrix = np.zeros((capacity, dim), dtype=np.float32)
        if "basis" in arrays:
            index._basis = np.ascontiguousarray(arrays["basis"], dtype=np.float32)
            index._coarse = np.zeros((capacity, index._basis.shape[1]), dtype=np.float32)
            index._coarse[:n] = arrays["coarse"]
        if "matrix" in arrays:
            index._matrix[:n] = arrays["matrix"]
        elif n:
            if index._basis is None or rows is None or whole is None:
                raise ValueError("a partial index needs a shortlist and both readers")
            index._missing, index._rows, index._whole = n, rows, whole
        return index

    def materialize(self) -> None:
        """Read the vectors a partial index lacks (``whole()`` raises if it cannot)."""
        if not self._missing:
            return
        assert self._whole is not None
        matrix = self._whole()
        if matrix.shape != (self._missing, self.dim):
            raise ValueError(f"expected {(self._missing, self.dim)} vectors, got {matrix.shape}")
        self._matrix[: self._missing] = matrix
        self._missing, self._rows, self._whole = 0, None, None

    def lacking(self, count: int) -> np.ndarray:
        """The keys of the last ``count`` (at most) vectors a partial index lacks, in position order."""
        return self._keys[max(0, self._missing - count) : self._missing]

    def supply(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Fill in the vectors of ``keys`` (what :meth:`lacking` named), so fewer are lacking."""
        import numpy as np

        start = self._missing - len(keys)
        if start < 0 or not np.array_equal(self._keys[start : self._missing], keys):
            raise ValueError("these are not the vectors this index lacks")
        self._matrix[start : self._missing] = vectors
        self._missing = start
        if not start:
            self._rows, self._whole = None, None

    def _whole_only(self) -> None:
        if self._missing:
            raise RuntimeError("this vector index is partial: materialize() it first")

    def add(self, keys: Sequence[int] | np.ndarray, vectors: np.ndarray, adopt: bool = False) -> None:
        """Append ``vectors`` under ``keys``; ``adopt``: an empty index may keep ``vectors`` (a
        writable float32 array nobody else holds) as its matrix instead of copying it."""
        import numpy as np

        if len(keys) == 0:
            return
        vectors = np.asarray(vectors, dtype=np.float32)
        if adopt and not self._size and not self._missing and vectors.flags.writeable and vectors.flags.c_contiguous:
            self._adopt(keys, vectors)
            return
        self._append(keys, vectors)

    def _append(self, keys: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        import numpy as np

        need = self._size + len(keys)
        if need > self._matrix.shape[0]:
            capacity = max(need, 2 * self._matrix.shape[0], 64)
            matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            # Rows a partial index lacks stay untouched zeros until materialize() fills them.
            matrix[self._missing : self._size] = self._matrix[self._missing : self._size]
            key_array = np.zeros(capacity, dtype=np.int64)
            key_array[: self._size] = self._keys[: self._size]
            self._matrix, self._keys = matrix, key_array
            if self._basis is not None:
                coarse = np.zeros((capacity, self._basis.shape[1]), dtype=np.float32)
                coarse[: self._size] = self._coarse[: self._size]
                self._coarse = coarse
        self._matrix[self._size : need] = vectors
        self._keys[self._size : need] = keys
        if self._basis is not None:
            self._coarse[self._size : need] = vectors @ self._basis
        if self._position is not None:
            for offset, key in enumerate(keys):
                self._position[int(key)] = self._size + offset
        self._size = need
        self._sorted = None
        self._moments.add(vectors)
        if self._basis is None and self._size >= SHORTLIST_MIN and self.dim > _COARSE_DIMS:
            self._build_shortlist()

    def _adopt(self, keys: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        import numpy as np

        self._matrix = vectors
        self._keys = np.array(keys, dtype=np.int64)
        self._size = len(self._keys)
        self._position, self._sorted = None, None  # found by bisection while the keys ascend
        if self._basis is not None:
            self._coarse = vectors @ self._basis
        self._moments.add(vectors)
        if self._basis is None and self._size >= SHORTLIST_MIN and self.dim > _COARSE_DIMS:
            self._build_shortlist()

    def _build_shortlist(self) -> None:
        import numpy as np

        self._whole_only()
        # Principal axes of the stored vectors (uncentred: cosine is about direction).
        _, vectors = np.linalg.eigh(self._moments.moment)
        self._basis = np.ascontiguousarray(vectors[:, ::-1][:, :_COARSE_DIMS], dtype=np.float32)
        coarse = np.zeros((self._matrix.shape[0], _COARSE_DIMS), dtype=np.float32)
        coarse[: self._size] = self._matrix[: self._size] @ self._basis
        self._coarse = coarse

    def remove(self, keys: Sequence[int]) -> None:
        import numpy as np

        where = self._positions()
        drop = {int(k) for k in keys if int(k) in where}
        if not drop:
            return
        self._whole_only()
        gone = np.fromiter((where[k] for k in drop), dtype=np.int64)
        self._moments.remove(self._matrix[gone])
        keep = np.setdiff1d(np.arange(self._size), gone, assume_unique=True)
        self._matrix = np.ascontiguousarray(self._matrix[keep])
        self._keys = self._keys[keep].copy()
        if self._basis is not None:
            self._coarse = np.ascontiguousarray(self._coarse[keep])
        self._size = len(keep)
        self._position, self._sorted = None, None

    def stats(self, query: np.ndarray) -> tuple[float, float]:
        """Mean and standard deviation of ``query``'s cosine over the namespace, exactly."""
        return self._moments.stats(query)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of ``query`` with every vector, by position."""
        self._whole_only()
        return _matvec(self._matrix[: self._size], query)

    def exact(self, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        rows = self._matrix[positions]
        if self._missing:
            lacking = positions < self._missing
            if lacking.any():
                assert self._rows is not None
                rows[lacking] = self._rows(self._keys[positions[lacking]])
        return _matvec(rows, query)

    def shortlist(self, query: np.ndarray, size: int) -> np.ndarray | None:
        """Positions of the ``size`` best vectors by the coarse projection (None: score exactly)."""
        import numpy as np

        if self._basis is None or size >= self._size:
            return None
        coarse = _matvec(self._coarse[: self._size], (query @ self._basis).astype(np.float32))
        return np.argpartition(-coarse, size - 1)[:size]

    def key(self, position: int) -> int:
        return int(self._keys[position])

    def position(self, key: int) -> int | None:
        import numpy as np

        if self._position is not None:
            return self._position.get(key)
        keys = self._keys[: self._size]
        if self._ascending():
            at = int(np.searchsorted(keys, key))
            return at if at < self._size and int(keys[at]) == key else None
        return self._positions().get(key)

    def _positions(self) -> dict[int, int]:
        if self._position is None:
            self._position = {k: i for i, k in enumerate(self._keys[: self._size].tolist())}
        return self._position

    def _ascending(self) -> bool:
        import numpy as np

        if self._sorted is None:
            keys = self._keys[: self._size]
            self._sorted = self._size < 2 or bool(np.all(keys[1:] > keys[:-1]))
        return self._sorted


def _pick(
    index: VectorIndex, positions: np.ndarray, scores: np.ndarray, depth: int, allowed: Any
) -> tuple[list[int], dict[int, float]]:
    """The best ``depth`` keys among ``positions`` that pass ``allowed``, asked in growing windows."""
    import numpy as np

    ranked: list[int] = []
    cosine: dict[int, float] = {}
    n = len(scores)
    take = min(n, max(depth * 2, 32))
    seen = 0
    while seen < n:
        if take >= n:
            order = np.argsort(-scores, kind="stable")
        else:
            part = np.argpartition(-scores, take - 1)[:take]
            order = part[np.argsort(-scores[part], kind="stable")]
        window = [index.key(int(positions[i])) for i in order[seen:take]]
        passing = set(window) if allowed is None else allowed(window)
        for i, key in zip(order[seen:take], window, strict=True):
            if key in passing and len(ranked) < depth:
                ranked.append(key)
                cosine[key] = float(scores[i])
        seen = take
        if len(ranked) >= depth:
            break
        take = min(n, widened(take, len(ranked), depth))
    return ranked, cosine


def widened(checked: int, passed: int, wanted: int) -> int:
    """How many of the best candidates to test against a filter next, after ``passed`` of the best
    ``checked`` did and ``wanted`` must: enough that, at the share passing so far, ``wanted`` pass
    with a quarter to spare (between 2 and 32 times ``checked``; 8 times when none passed yet).
    Growing by a fixed factor tested up to 8 times the rows a selective filter needed."""
    if passed == 0:
        return checked * 8
    return checked * min(32, max(2, math.ceil(1.25 * wanted / passed)))


#: Keys a filter is tried on to estimate how many of the namespace pass it (evenly spaced).
_SAMPLE = 256


def _share(index: VectorIndex, allowed: Any) -> float:
    """The share of the namespace that passes ``allowed``, from an evenly spaced sample of it."""
    import numpy as np

    positions = np.unique(np.linspace(0, len(index) - 1, min(_SAMPLE, len(index))).astype(np.int64))
    keys = [index.key(int(p)) for p in positions]
    return len(allowed(keys)) / len(keys)


def dense_leg(
    index: VectorIndex,
    query: np.ndarray,
    depth: int,
    allowed: Any = None,
    extra: Sequence[int] = (),
    exact: bool = False,
) -> DenseScores:
    """Score the namespace; return the top ``depth`` keys that pass ``allowed``.

    ``allowed(keys) -> set of keys`` filters candidates (metadata filters); it is
    asked for progressively larger slices so a selective filter still finds its
    ``depth`` best matches without checking every memory up front. A namespace with a
    shortlist first estimates from a sample how many of its rows pass: few enough
    (:func:`memkit._retrieval._config.dense_path`) and every vector is scored exactly;
    more, and the shortlist is widened so that about as many passing rows are rescored as
    an unfiltered query rescores rows. ``exact``: never the shortlist. ``extra`` keys
    (the keyword leg's hits) get their exact cosine too.
    """
    import numpy as np

    n = len(index)
    if n == 0:
        return DenseScores({}, [], 0.0, 0.0)
    mean, std = index.stats(query)
    ranked: list[int] = []
    cosine: dict[int, float] = {}
    path, short = "exact", None
    if not exact and not index.needs_all(depth):
        size = max(depth * 20, _SHORTLIST)
        share = 1.0 if allowed is None else _share(index, allowed)
        if allowed is None or dense_path(round(share * n)) == "index":
            # Twice the rows for a filter: 8,000 rescored find 99% of the exact top 10 (docs/retrieval.md).
            short = index.shortlist(query, size if allowed is None else min(n, math.ceil(2 * size / share)))
    if short is not None:
        ranked, cosine = _pick(index, short, index.exact(short, query), depth, allowed)
        path = "index"
    if short is None or len(ranked) < depth:
        # Small namespace, a selective filter, or too few passing in the shortlist: score everything.
        ranked, cosine = _pick(index, np.arange(n), index.scores(query), depth, allowed)
        path = "exact"
    wanted = [(key, pos) for key in extra if key not in cosine and (pos := index.position(key)) is not None]
    if wanted:
        values = index.exact(np.array([p for _, p in wanted], dtype=np.int64), query)
        cosine.update((key, float(v)) for (key, _), v in zip(wanted, values, strict=True))
    return DenseScores(cosine, ranked, mean, std, path)


#: ``neighbours(keys, reach)``: for each key, ``(distance, key)`` of the memories written up to
#: ``reach`` places before and after it in its namespace.
Neighbours = Callable[[Iterable[Any], int], Mapping[Any, Sequence[tuple[int, Any]]]]
#: How much of ``context`` a neighbour at distance 1, 2, ... passes on (measured in docs/retrieval.md).
CONTEXT_REACH = (1.0, 1.0 / 3.0)
#: ``speakers(keys)``: the keys whose memory is a chat line by someone the query names (bound to the
#: query by the pipeline; see :meth:`memkit._retrieval._keyword.KeywordIndex.spoken_by`).
Speakers = Callable[[list[Any]], "set[Any]"]


def fuse(
    keyword: Sequence[tuple[K, float]],
    dense: DenseScores,
    config: HybridConfig,
    neighbours: Neighbours | None = None,
    speakers: Speakers | None = None,
) -> list[tuple[K, float, dict[str, Any]]]:
    """Fuse the legs into ``(key, fused score, score_details)``, best first.

    ``keyword`` is the keyword leg's ``(key, score)`` list, best first (higher is
    better); ``dense.cosine`` must hold a cosine for every keyword key that has a
    vector. ``neighbours`` (see :data:`Neighbours`) gives the memories written around
    each candidate, for ``config.context``; ``speakers`` (see :data:`Speakers`) the
    candidates spoken by someone the query names, for ``config.speaker``. Ties keep
    the order of first appearance (keyword leg, then dense), which the caller breaks
    by recency.
    """
    best = max((s for _, s in keyword), default=0.0)
    kw_rank = {key: (rank, score) for rank, (key, score) in enumerate(keyword, start=1)}
    dense_rank = {key: rank for rank, key in enumerate(dense.ranked, start=1)}
    alpha = float(config.alpha)
    spread = dense.std if dense.std > 1e-9 else 1.0
    out: list[tuple[K, float, dict[str, Any]]] = []
    floor = float(config.min_similarity)
    semantic_only = [k for k in dense.ranked if k not in kw_rank and dense.cosine[k] >= floor]
    for key in dict.fromkeys([*(k for k, _ in keyword), *semantic_only]):
        k_rank, k_score = kw_rank.get(key, (None, None))
        k_norm = (k_score / best) if (k_score is not None and best > 0) else 0.0
        cos = dense.cosine.get(key)
        d_norm = max(0.0, (cos - dense.mean) / spread / config.dense_scale) if cos is not None else 0.0
        fused = (1.0 - alpha) * k_norm + alpha * d_norm
        details: dict[str, Any] = {
            "mode": "hybrid",
            "found_by": [leg for leg, hit in (("keyword", k_rank), ("semantic", dense_rank.get(key))) if hit],
            "keyword": {"rank": k_rank, "score": k_score, "normalized": round(k_norm, 6)},
            "semantic": {"rank": dense_rank.get(key), "score": cos, "normalized": round(d_norm, 6)},
            "fused": {"score": fused, "alpha": alpha, "context": 0.0, "speaker": 1.0},
        }
        out.append((key, fused, details))
    if neighbours is not None and config.context > 0 and out:
        out = _with_context(out, neighbours, float(config.context))
    if speakers is not None and config.speaker > 0 and out:
        # After context: the turn next to a named speaker's line still gets its pull, but
        # only the lines they spoke are weighted (measured both ways in docs/retrieval.md).
        named = speakers([key for key, _, _ in out])
        if named:
            factor = 1.0 + float(config.speaker)
            for position, (key, value, details) in enumerate(out):
                if key in named:
                    details["fused"]["speaker"] = factor
                    details["fused"]["score"] = value * factor
                    out[position] = (key, value * factor, details)
    out.sort(key=lambda t: -t[1])
    return out


def _with_context(
    fused: list[tuple[K, float, dict[str, Any]]], neighbours: Neighbours, weight: float
) -> list[tuple[K, float, dict[str, Any]]]:
    """Add, per distance, ``weight`` x :data:`CONTEXT_REACH` x how much the better side outscores the
    candidate (candidates with a score of their own only; a neighbour the legs did not find adds nothing)."""
    score = {key: value for key, value, _ in fused}
    around = neighbours([key for key, _, _ in fused], len(CONTEXT_REACH))
    out = []
    for key, value, details in fused:
        best: dict[int, float] = {}
        # A memory neither leg rates above zero is unrelated, wherever it was written: no pull.
        for distance, other in around.get(key, ()) if value > 0 else ():
            best[distance] = max(best.get(distance, 0.0), score.get(other, 0.0))
        gain = weight * sum(CONTEXT_REACH[d - 1] * max(0.0, v - value)
                            for d, v in best.items() if 0 < d <= len(CONTEXT_REACH))
        details["fused"]["context"] = gain
        details["fused"]["score"] = value + gain
        out.append((key, value + gain, details))
    return out
