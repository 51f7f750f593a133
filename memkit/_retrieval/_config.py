"""The knobs of hybrid search and the search modes: what every adapter checks a search against.

Kept apart from the fusion itself (:mod:`memkit._retrieval._fusion`, which re-exports these) so the
arguments can be checked without the numeric code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from memkit._core._errors import ConfigError, InvalidInputError

__all__ = [
    "EXACT_MAX", "MODES", "HybridConfig", "SearchOptions", "check_hybrid", "check_mode", "dense_path", "leg_depth",
    "modes_for",
]

MODES = ("hybrid", "keyword", "semantic")


@dataclass(frozen=True)
class HybridConfig:
    """The knobs of hybrid search; the defaults are the ones measured in docs/retrieval.md.

    Parameters
    ----------
    alpha
        Weight of the semantic leg in ``[0, 1]`` (0 = keyword only, 1 = semantic
        only). Default 0.5.
    dense_scale
        Divides the semantic z-score before fusion: a memory ``dense_scale``
        standard deviations above the namespace's mean similarity counts as much
        as the best keyword hit. Default 4.0.
    candidates
        How many results each leg contributes before fusion. Default 100.
    min_similarity
        A memory the keyword leg did not find is only returned if its cosine
        similarity reaches this (so a query about "restart" does not return every
        memory of a small namespace). Default 0.5: the shipped static model's cosines
        run high (unrelated short texts about 0.2-0.6, "dog" against "Caroline adopted a
        golden retriever puppy" 0.54, LoCoMo turns of one conversation about 0.8 since
        they share a date and speaker prefix), so this is a coarse guard; any value up
        to 0.7 scores the same on the dev set.
    context
        Pull of a memory's neighbours: each candidate adds ``context`` times the amount
        by which the better of the memories written just before and just after it in
        its namespace outscores it, and a third of that for the two written two places
        away. A neighbour that scores no higher adds nothing, so equally good memories
        keep their order, and a memory scoring zero on its own stays at zero. 0 turns
        it off. Default 0.6 (chosen leave-one-conversation-out on LoCoMo, where it lifts
        R@10 most of all the changes measured).
    speaker
        Extra weight of a chat line (``"[date] Name: text"``) whose speaker the query names:
        its fused score is multiplied by ``1 + speaker``. Memories that are not chat lines,
        and queries that name nobody who speaks in the candidates, are unaffected. 0 turns
        it off. Default 0.5 (chosen leave-one-conversation-out on LoCoMo: R@10 +0.03, MRR@10
        +0.04, multi-hop R@10 +0.05).
    """

    alpha: float = 0.5
    dense_scale: float = 4.0
    candidates: int = 100
    min_similarity: float = 0.5
    context: float = 0.6
    speaker: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.alpha, (int, float)) or not 0.0 <= float(self.alpha) <= 1.0:
            raise ConfigError(f"HybridConfig.alpha must be in [0, 1], got {self.alpha!r}")
        if not isinstance(self.dense_scale, (int, float)) or not float(self.dense_scale) > 0.0:
            raise ConfigError(f"HybridConfig.dense_scale must be > 0, got {self.dense_scale!r}")
        if isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or self.candidates < 1:
            raise ConfigError(f"HybridConfig.candidates must be a positive int, got {self.candidates!r}")
        if not isinstance(self.min_similarity, (int, float)) or not -1.0 <= float(self.min_similarity) <= 1.0:
            raise ConfigError(f"HybridConfig.min_similarity must be in [-1, 1], got {self.min_similarity!r}")
        if not isinstance(self.context, (int, float)) or not 0.0 <= float(self.context) <= 1.0:
            raise ConfigError(f"HybridConfig.context must be in [0, 1], got {self.context!r}")
        if (isinstance(self.speaker, bool) or not isinstance(self.speaker, (int, float))
                or not 0.0 <= float(self.speaker) <= 10.0):
            raise ConfigError(f"HybridConfig.speaker must be in [0, 10], got {self.speaker!r}")


def modes_for(has_embedder: bool) -> tuple[str, ...]:
    """The modes a store answers: all three with an embedder, keyword search without one."""
    return MODES if has_embedder else ("keyword",)


def leg_depth(mode: str, config: HybridConfig, limit: int) -> int:
    """How many candidates each leg of a search contributes (hybrid: ``config.candidates``; else the limit)."""
    return max(config.candidates, limit) if mode == "hybrid" else limit


#: A filtered dense leg scores the rows that pass exactly when at most this many do: 20,000
#: 384-dimension vectors are 30 MB, a few milliseconds to score, and an approximate index asked
#: for the nearest rows of everything, filtered afterwards, misses true neighbours of a selective
#: filter (issue 46: 0.73-0.95 of the exact filtered top 10).
EXACT_MAX = 20_000


def dense_path(passing: int | None) -> str:
    """``"exact"`` or ``"index"``: how a dense leg answers when ``passing`` rows pass its filters
    (``None``: more than :data:`EXACT_MAX`, counting stopped there). The one decision every
    backend makes; ``score_details["dense_path"]`` reports what answered."""
    return "exact" if passing is not None and passing <= EXACT_MAX else "index"


def check_mode(mode: object, supported: Sequence[str], owner: str) -> str:
    """Resolve ``mode`` against the modes ``owner`` declares (``None``: hybrid if offered, else its first).

    An unknown or unsupported mode is bad input to this call, whichever adapter it is.
    """
    if mode is None:
        return "hybrid" if "hybrid" in supported else supported[0]
    if mode not in MODES:
        raise InvalidInputError(f"mode must be 'hybrid', 'keyword' or 'semantic', got {mode!r}")
    if mode not in supported:
        hint = (
            "; open the store with embedder='default' (or an Embedder instance) for semantic and hybrid search"
            if "semantic" not in supported and "keyword" in supported else ""
        )
        raise InvalidInputError(
            f"{owner} searches with mode {', '.join(repr(m) for m in supported)} only, not {mode!r}{hint}"
        )
    return str(mode)


def check_hybrid(hybrid: object) -> HybridConfig | None:
    """A per-call ``hybrid=`` argument: ``None`` or a :class:`HybridConfig`."""
    if hybrid is not None and not isinstance(hybrid, HybridConfig):
        raise InvalidInputError(f"hybrid must be a HybridConfig, got {type(hybrid).__name__}")
    return hybrid


class SearchOptions(TypedDict, total=False):
    """The keywords a search takes besides query, namespace, limit, filters and mode (those a
    caller that forwards them, such as ``Memory.search`` or ``memkit.evaluate``, passes on)."""

    hybrid: HybridConfig | None
    as_of: datetime | None
