"""Context assembly (``get_context``): the best memories that fit a token budget."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from memkit._core._errors import InvalidInputError
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsSearchModes
from memkit._recall import _recording as _recall

__all__ = ["ContextWindow", "build_context", "count_tokens"]

_WORDS = re.compile(r"\w+", re.UNICODE)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` counted offline with the shipped BERT uncased WordPiece vocabulary.

    A proxy for an LLM's own tokenizer (English prose lands close to GPT-style
    BPE counts); pass your own ``count_tokens`` to :func:`build_context` for an
    exact budget.
    """
    from memkit.embeddings import _default_static

    return _default_static().count_tokens(text)


class ContextWindow(BaseModel):
    """What :func:`build_context` returns: the chosen memories and the prompt block."""

    model_config = ConfigDict(defer_build=True)

    query: str
    items: list[MemoryItem] = Field(default_factory=list)
    text: str = ""
    token_count: int = 0
    token_budget: int
    order: str
    candidates: int = 0
    duplicates: int = 0
    dropped: int = 0


def _fingerprint(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORDS.findall(text))


def _near_duplicate(words: frozenset[str], kept: list[frozenset[str]], threshold: float) -> bool:
    for other in kept:
        union = len(words | other)
        if union == 0 or len(words & other) / union >= threshold:
            return True
    return False


def _render_line(item: MemoryItem, template: str) -> str:
    date = item.created_at.strftime("%Y-%m-%d") if item.created_at is not None else ""
    return template.format(content=item.content, date=date, id=item.id, score=item.score, metadata=item.metadata)


def _resolved_mode(provider: MemoryProvider, mode: str | None, hits: list[MemoryItem]) -> str:
    if mode is not None:
        return mode
    for item in hits:
        if item.score_details and isinstance(item.score_details.get("mode"), str):
            return str(item.score_details["mode"])
    return "hybrid" if isinstance(provider, SupportsSearchModes) and "hybrid" in provider.search_modes else "keyword"


class ContextOptions(TypedDict, total=False):
    """The keywords :func:`build_context` takes besides the store, query, namespace and budget (what
    ``Memory.build_context`` passes on)."""

    candidates: int
    filters: dict[str, Any] | None
    mode: str | None
    order: Literal["relevance", "chronological"]
    header: str
    template: str
    dedup_threshold: float
    count_tokens: Callable[[str], int]


async def build_context(
    provider: MemoryProvider,
    query: str,
    user_id: str,
    agent_id: str,
    token_budget: int = 1_000,
    *,
    candidates: int = 30,
    filters: dict[str, Any] | None = None,
    mode: str | None = None,
    order: Literal["relevance", "chronological"] = "relevance",
    header: str = "Relevant memories:",
    template: str = "- [{date}] {content}",
    dedup_threshold: float = 0.9,
    count_tokens: Callable[[str], int] = count_tokens,
) -> ContextWindow:
    """Pick the most relevant memories that fit ``token_budget`` and render them for a prompt.

    Searches ``candidates`` memories, drops duplicates (the same words, compared
    as sets with Jaccard similarity >= ``dedup_threshold``, keeping the better
    ranked one), then takes memories best first while they fit: one that does
    not fit is skipped and smaller ones after it may still go in. The kept
    memories are listed best first (``order="relevance"``) or oldest first
    (``order="chronological"``), one ``template`` line each under ``header``;
    ``token_count`` is the count of the whole rendered ``text`` and never exceeds
    ``token_budget``.

    Recorded as one recall (``kind="context"``) holding the memories that went into
    ``text`` when recording is on (see :func:`memkit.recall_scope`).

    Examples
    --------
    >>> window = await build_context(mem, "TP53 results", "u1", "bio", 200)  # doctest: +SKIP
    >>> prompt = f"{window.text}\\n\\nQuestion: ..."                          # doctest: +SKIP
    """
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise InvalidInputError(f"token_budget must be a positive int, got {token_budget!r}")
    if order not in ("relevance", "chronological"):
        raise InvalidInputError(f"order must be 'relevance' or 'chronological', got {order!r}")
    if not 0.0 < dedup_threshold <= 1.0:
        raise InvalidInputError(f"dedup_threshold must be in (0, 1], got {dedup_threshold!r}")
    options: dict[str, Any] = {"limit": candidates, "filters": filters}
    if mode is not None:
        options["mode"] = mode
    # The search is not recorded on its own: the recall is the context built from it (below).
    with _recall.paused():
        hits: list[MemoryItem] = await provider.search(query, user_id, agent_id, **options)

    unique: list[MemoryItem] = []
    seen: list[frozenset[str]] = []
    duplicates = 0
    for item in hits:
        words = _fingerprint(item.content)
        if _near_duplicate(words, seen, dedup_threshold):
            duplicates += 1
            continue
        seen.append(words)
        unique.append(item)

    # Lines are joined with newlines; count the whole block as it grows so the
    # reported total is exactly what the prompt will contain.
    chosen: list[tuple[MemoryItem, str]] = []
    used = count_tokens(header) if header else 0
    dropped = 0
    for item in unique:
        line = _render_line(item, template)
        cost = count_tokens(line) + (1 if header or chosen else 0)
        if used + cost > token_budget:
            dropped += 1
            continue
        chosen.append((item, line))
        used += cost
    if order == "chronological":
        chosen.sort(key=lambda pair: (pair[0].created_at is None, pair[0].created_at))
    lines = ([header] if header else []) + [line for _, line in chosen]
    text = "\n".join(lines) if chosen else ""
    total = count_tokens(text) if text else 0
    while chosen and total > token_budget:  # a tokenizer that is not additive over lines
        chosen.pop()
        lines = ([header] if header else []) + [line for _, line in chosen]
        text = "\n".join(lines) if chosen else ""
        total = count_tokens(text) if text else 0
        dropped += 1
    rank = {item.id: position for position, item in enumerate(hits, start=1)}
    kept = [item for item, _ in chosen]
    await _recall.settle(_recall.record(
        provider, kind="context", query=query, user_id=user_id, agent_id=agent_id,
        mode=_resolved_mode(provider, mode, hits), filters=filters, limit=candidates, hits=kept,
        ranks=[rank[item.id] for item in kept],
        options={"token_budget": token_budget, "order": order, "dedup_threshold": dedup_threshold},
    ))
    return ContextWindow(
        query=query, items=kept, text=text, token_count=total,
        token_budget=token_budget, order=order, candidates=len(hits), duplicates=duplicates, dropped=dropped,
    )
