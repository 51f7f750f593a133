"""build_context: the best memories that fit a token budget, deduplicated, rendered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import memkit
from memkit import ContextWindow, InvalidInputError, build_context
from memkit._recall._context import count_tokens
from memkit.adapters import InMemoryAdapter, SQLiteAdapter

NS = ("u1", "bio")


@pytest.fixture
async def mem(tmp_path: Path) -> AsyncIterator[SQLiteAdapter]:
    adapter = SQLiteAdapter(tmp_path / "c.db", embedder="default")
    await adapter.add_many([
        {"content": "TP53 is mutated in sample 7", "user_id": "u1", "agent_id": "bio",
         "created_at": datetime(2024, 1, 3, tzinfo=UTC)},
        {"content": "TP53 is mutated in sample 7.", "user_id": "u1", "agent_id": "bio",
         "created_at": datetime(2024, 1, 4, tzinfo=UTC)},
        {"content": "BRCA1 and TP53 were both sequenced in the second TP53 run", "user_id": "u1",
         "agent_id": "bio", "created_at": datetime(2024, 1, 1, tzinfo=UTC)},
        {"content": "A long note about TP53: " + "the pathway analysis was inconclusive " * 20,
         "user_id": "u1", "agent_id": "bio", "created_at": datetime(2024, 1, 2, tzinfo=UTC)},
        {"content": "Lunch options near the lab include noodles", "user_id": "u1", "agent_id": "bio"},
    ])
    yield adapter
    await adapter.aclose()


async def test_fits_the_budget_and_counts_the_rendered_text(mem: SQLiteAdapter) -> None:
    window = await build_context(mem, "TP53", *NS, token_budget=40)
    assert isinstance(window, ContextWindow)
    assert window.items, "something fits in 40 tokens"
    assert window.token_count == count_tokens(window.text) <= 40
    assert window.text.splitlines()[0] == "Relevant memories:"
    assert len(window.text.splitlines()) == len(window.items) + 1
    # the long note does not fit, but smaller ones after it still go in
    assert all("pathway" not in i.content for i in window.items)
    assert window.dropped >= 1


async def test_duplicates_are_dropped_keeping_the_better_ranked(mem: SQLiteAdapter) -> None:
    window = await build_context(mem, "TP53 sample 7", *NS, token_budget=1_000)
    contents = [i.content.rstrip(".") for i in window.items]
    assert contents.count("TP53 is mutated in sample 7") == 1
    assert window.duplicates == 1
    assert window.candidates == len(window.items) + window.duplicates + window.dropped


async def test_orders(mem: SQLiteAdapter) -> None:
    by_relevance = await build_context(mem, "TP53", *NS, token_budget=1_000)
    scores = [i.score for i in by_relevance.items]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    chronological = await build_context(mem, "TP53", *NS, token_budget=1_000, order="chronological")
    times = [i.created_at for i in chronological.items]
    assert times == sorted(times)  # type: ignore[type-var]
    assert {i.id for i in chronological.items} == {i.id for i in by_relevance.items}
    assert chronological.text.splitlines()[1].startswith("- [2024-01-01] BRCA1")


async def test_a_tiny_budget_gives_an_empty_block(mem: SQLiteAdapter) -> None:
    window = await build_context(mem, "TP53", *NS, token_budget=3)
    assert window.items == [] and window.text == "" and window.token_count == 0


async def test_custom_counter_template_and_filters(mem: SQLiteAdapter) -> None:
    window = await build_context(
        mem, "TP53", *NS, token_budget=10, count_tokens=lambda text: len(text.split()),
        template="* {content}", header="", mode="keyword",
    )
    assert window.token_count == len(window.text.split()) <= 10
    assert all(line.startswith("* ") for line in window.text.splitlines())


async def test_bad_arguments(mem: SQLiteAdapter) -> None:
    for bad in (0, -5, 1.5, True):
        with pytest.raises(InvalidInputError):
            await build_context(mem, "TP53", *NS, token_budget=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        await build_context(mem, "TP53", *NS, order="random")  # type: ignore[arg-type]


async def test_works_on_any_provider_and_from_the_sync_facade(tmp_path: Path) -> None:
    plain = InMemoryAdapter()
    await plain.add("kinase screen results are in", *NS)
    window = await build_context(plain, "kinase", *NS, token_budget=50)
    assert [i.content for i in window.items] == ["kinase screen results are in"]


def test_sync_facade(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path}/s.db?embedder=default") as mem:
        mem.add("kinase screen results are in", *NS)
        window = mem.build_context("kinase", *NS, token_budget=50)
        assert window.items[0].content == "kinase screen results are in"
        assert window.token_count <= 50
